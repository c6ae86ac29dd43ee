//go:build ignore

// Walk measures the walk from app.Run: a depth-first walk, in source
// order, over every function, method and package-level variable that
// Run's body names, then theirs, and so on (resolved with go/types; a
// variable's initializer is walked, so a table's functions count; calls
// through interfaces and func fields are not followed). It prints how
// many functions and files the walk reaches, how often it moves from one
// file to another (entering a callee, and coming back), and how many of
// those moves go back into a file already visited.
//
//	go run scripts/walk.go [package, default ./app] [root, default Run]
//
// WALK_SCOPE=module follows calls into every package of the module, not
// only the root's; WALK_TABLES=0 leaves variables out; WALK_DEPTH=n stops
// n calls below the root; WALK_VERBOSE=1 lists the walk.
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

type listed struct {
	ImportPath, Dir, Export string
	GoFiles                 []string
	Module                  *struct{ Path, Dir string }
}

func main() {
	dir, root := "./app", "Run"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if len(os.Args) > 2 {
		root = os.Args[2]
	}
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,Module", dir).Output()
	if err != nil {
		panic(err)
	}
	pkgs := map[string]listed{}
	var rootPath, modPath, modDir string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			panic(err)
		}
		pkgs[p.ImportPath] = p
		rootPath = p.ImportPath // -deps lists the root last
		if p.Module != nil {
			modPath, modDir = p.Module.Path, p.Module.Dir
		}
	}
	moduleWide := os.Getenv("WALK_SCOPE") == "module"
	ours := func(path string) bool {
		if moduleWide {
			return path == modPath || strings.HasPrefix(path, modPath+"/")
		}
		return path == rootPath
	}

	fset := token.NewFileSet()
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	bodies := map[types.Object]ast.Node{}
	checked := map[string]*types.Package{}
	gc := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(pkgs[path].Export) })
	var imp importerFunc
	imp = func(path string) (*types.Package, error) {
		if p, ok := checked[path]; ok {
			return p, nil
		}
		if !ours(path) {
			return gc.Import(path)
		}
		l := pkgs[path]
		var files []*ast.File
		for _, name := range l.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(l.Dir, name), nil, 0)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		p, err := (&types.Config{Importer: imp}).Check(path, fset, files, info)
		if err != nil {
			return nil, err
		}
		checked[path] = p
		for _, f := range files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Body != nil {
						bodies[info.Defs[d.Name]] = d.Body
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if vs, ok := s.(*ast.ValueSpec); ok && d.Tok == token.VAR {
							for i, n := range vs.Names {
								if i < len(vs.Values) {
									bodies[info.Defs[n]] = vs.Values[i]
								}
							}
						}
					}
				}
			}
		}
		return p, nil
	}
	rootPkg, err := imp(rootPath)
	if err != nil {
		panic(err)
	}
	start := rootPkg.Scope().Lookup(root)

	maxDepth := 1 << 30
	if d := os.Getenv("WALK_DEPTH"); d != "" {
		fmt.Sscan(d, &maxDepth)
	}
	rel := func(pos token.Pos) string {
		name := fset.Position(pos).Filename
		if r, err := filepath.Rel(modDir, name); err == nil {
			return r
		}
		return name
	}
	seen := map[types.Object]bool{}
	visited := map[string]bool{}
	var order []string
	funcs, moves, climbs, depth := 0, 0, 0, 0
	cur := ""
	enter := func(file string) {
		if file != cur {
			moves++
			if visited[file] {
				climbs++
			}
		}
		visited[file], cur = true, file
	}
	var visit func(o types.Object)
	visit = func(o types.Object) {
		depth++
		defer func() { depth-- }()
		seen[o] = true
		file := rel(o.Pos())
		enter(file)
		name := o.Name()
		if fn, ok := o.(*types.Func); ok {
			funcs++
			if r := fn.Signature().Recv(); r != nil {
				name = strings.TrimPrefix(types.TypeString(r.Type(), types.RelativeTo(o.Pkg())), "*") + "." + name
			}
		}
		order = append(order, file+": "+name)
		ast.Inspect(bodies[o], func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			u := info.Uses[id]
			if u == nil || u.Pkg() == nil || !ours(u.Pkg().Path()) || seen[u] || bodies[u] == nil || depth > maxDepth {
				return true
			}
			if v, ok := u.(*types.Var); ok && (v.Parent() != u.Pkg().Scope() || os.Getenv("WALK_TABLES") == "0") {
				return true
			}
			visit(u)
			enter(file)
			return true
		})
	}
	visit(start)
	if os.Getenv("WALK_VERBOSE") != "" {
		for _, o := range order {
			fmt.Println("  " + o)
		}
	}
	names := make([]string, 0, len(visited))
	for k := range visited {
		names = append(names, k)
	}
	sort.Strings(names)
	body := bodies[start]
	lines := fset.Position(body.End()).Line - fset.Position(body.Pos()).Line + 1
	fmt.Printf("%s: %d lines; the walk reaches %d functions (and %d tables) in %d files, moves between files %d times, %d of them back into a file already visited\n",
		root, lines, funcs, len(seen)-funcs, len(visited), moves, climbs)
	fmt.Println("files: " + strings.Join(names, " "))
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
