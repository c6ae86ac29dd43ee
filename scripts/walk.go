//go:build ignore

// Walk measures the walk from app.Run: a depth-first walk, in source
// order, over every function, method and package-level variable of app/
// (non-test files) that Run's body names, then theirs, and so on
// (resolved with go/types; a variable's initializer is walked, so a
// table's functions count; calls through interfaces and func fields do
// not; WALK_TABLES=0 leaves variables out, WALK_DEPTH=n stops n calls
// below the root). It prints how many functions and files the walk reaches, how
// often it moves from one file to another (entering a callee, and coming
// back), and how many of those moves go back into a file already visited.
//
//	go run scripts/walk.go [package dir, default ./app] [root, default Run]
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

func main() {
	dir, root := "./app", "Run"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if len(os.Args) > 2 {
		root = os.Args[2]
	}
	exports := map[string]string{}
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", dir).Output()
	if err != nil {
		panic(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			panic(err)
		}
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			panic(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) })
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: imp}).Check("app", fset, files, info)
	if err != nil {
		panic(err)
	}
	// The body of every function and the initializer of every variable.
	bodies := map[types.Object]ast.Node{}
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
	start := pkg.Scope().Lookup(root)
	seen := map[types.Object]bool{}
	visited := map[string]bool{}
	var order []string
	funcs, moves, climbs := 0, 0, 0
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
	maxDepth := 1 << 30
	if d := os.Getenv("WALK_DEPTH"); d != "" {
		fmt.Sscan(d, &maxDepth)
	}
	depth := 0
	var visit func(o types.Object)
	visit = func(o types.Object) {
		depth++
		defer func() { depth-- }()
		seen[o] = true
		file := filepath.Base(fset.Position(o.Pos()).Filename)
		enter(file)
		name := o.Name()
		if fn, ok := o.(*types.Func); ok {
			funcs++
			if r := fn.Signature().Recv(); r != nil {
				name = strings.TrimPrefix(types.TypeString(r.Type(), types.RelativeTo(pkg)), "*") + "." + name
			}
		}
		order = append(order, file+": "+name)
		ast.Inspect(bodies[o], func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			u := info.Uses[id]
			if u == nil || u.Pkg() != pkg || seen[u] || bodies[u] == nil || depth > maxDepth {
				return true
			}
			if v, ok := u.(*types.Var); ok && (v.Parent() != pkg.Scope() || os.Getenv("WALK_TABLES") == "0") {
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
