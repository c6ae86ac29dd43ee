package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

// page is the page of who is being limited: plain HTML, CSS and
// JavaScript, served as they are.
//
//go:embed ui
var page embed.FS

// pageHandler serves the page's files under /ui/. They hold nothing but
// the page (it asks for the token itself), so they need no token; the
// answers forbid anything from another host, framing, and sniffing.
func pageHandler() http.Handler {
	files, err := fs.Sub(page, "ui")
	if err != nil {
		panic("admin: the page's files are missing: " + err.Error()) // a build defect
	}
	fileServer := http.StripPrefix("/ui/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}
