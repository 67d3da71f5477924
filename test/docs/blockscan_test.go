package docs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// docblockImport is the package whose ShellBlock every test that runs a docs block calls.
const docblockImport = "github.com/etcd-adapter/etcd-adapter/test/env/docblock"

// selection is one (page, key) a call of docblock.ShellBlock passes: page relative to the
// repository, and the place of the call.
type selection struct {
	page, key, at string
}

// scanSelections reads every Go file under root (go/ast, no build) and returns each (page, key)
// passed to docblock.ShellBlock, and the calls whose directory, page or key it cannot read.
// It reads what a reader of the test reads: string literals, constants and variables of the
// package, `+`, filepath.Join, local variables, fields of a table-driven test's rows (a range
// over a composite literal), a function of the package that only returns an expression, and a
// parameter of the calling function, read at each call of that function in its package (so a
// wrapper such as shellBlock(g, page, key) is followed to its callers).
func scanSelections(root string) ([]selection, []string, error) {
	pkgs, err := parsePackages(root)
	if err != nil {
		return nil, nil, err
	}
	var sels []selection
	var unread []string
	for _, p := range pkgs {
		for _, site := range p.calls {
			if !p.isShellBlock(site) {
				continue
			}
			at := p.position(site.call)
			if len(site.call.Args) != 4 {
				unread = append(unread, at+": ShellBlock takes (g, dir, page, key)")
				continue
			}
			for _, e := range p.envs(site, 0) {
				s, err := p.selectionAt(root, site, e)
				if err != nil {
					unread = append(unread, fmt.Sprintf("%s: %v", at, err))
					continue
				}
				s.at = at
				if outer, ok := e[""]; ok {
					s.at = outer.s
				}
				sels = append(sels, s)
			}
		}
	}
	return sels, unread, nil
}

// selectionAt reads one call's directory, page and key in one binding of its names.
func (p *pkg) selectionAt(root string, site callSite, e bindings) (selection, error) {
	var vals [3]string
	for i, arg := range site.call.Args[1:] {
		v, err := p.eval(arg, site, e, 0)
		if err != nil {
			return selection{}, err
		}
		if v.row != nil {
			return selection{}, fmt.Errorf("argument %d is a table row, not a string", i+2)
		}
		vals[i] = v.s
	}
	page, err := filepath.Rel(root, filepath.Join(p.dir, vals[0], vals[1]))
	if err != nil {
		return selection{}, fmt.Errorf("failed to place page %s: %w", vals[1], err)
	}
	return selection{page: filepath.ToSlash(page), key: vals[2]}, nil
}

// pkg is the parsed Go files of one directory.
type pkg struct {
	root  string
	dir   string
	fset  *token.FileSet
	decls map[string]ast.Expr      // package-level constants and variables with one value
	funcs map[string]*ast.FuncDecl // functions (not methods)
	calls []callSite
	// docblockNames are the names files of this package import docblockImport under.
	docblockNames map[*ast.File]string
}

// callSite is a call with the function declaration it is in and its ancestors there, outermost
// first.
type callSite struct {
	file  *ast.File
	fn    *ast.FuncDecl
	stack []ast.Node
	call  *ast.CallExpr
}

// value is what an expression reads as: a string, or a row of a table.
type value struct {
	s   string
	row *ast.CompositeLit
}

// bindings binds names of a function to values: its parameters, read at one of its calls, and the
// variables of the range loops around a call, bound to one row each.
type bindings map[string]value

// maxDepth bounds how far calls of wrappers are followed.
const maxDepth = 6

func parsePackages(root string) ([]*pkg, error) {
	byDir := map[string]*pkg{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		dir := filepath.Dir(path)
		p := byDir[dir]
		if p == nil {
			p = &pkg{root: root, dir: dir, fset: token.NewFileSet(), decls: map[string]ast.Expr{}, funcs: map[string]*ast.FuncDecl{}, docblockNames: map[*ast.File]string{}}
			byDir[dir] = p
		}
		f, err := parser.ParseFile(p.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("failed to parse %s: %w", path, err)
		}
		p.add(f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read the Go files under %s: %w", root, err)
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	out := make([]*pkg, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, byDir[d])
	}
	return out, nil
}

// add records a file's declarations, its name for docblock and its calls.
func (p *pkg) add(f *ast.File) {
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == docblockImport {
			p.docblockNames[f] = "docblock"
			if imp.Name != nil {
				p.docblockNames[f] = imp.Name.Name
			}
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			p.addValues(d, p.decls)
		case *ast.FuncDecl:
			if d.Recv == nil {
				p.funcs[d.Name.Name] = d
			}
			p.addCalls(f, d)
		}
	}
}

// addValues records the names of a const or var declaration that have one value each.
func (p *pkg) addValues(d *ast.GenDecl, into map[string]ast.Expr) {
	if d.Tok != token.CONST && d.Tok != token.VAR {
		return
	}
	for _, s := range d.Specs {
		vs, ok := s.(*ast.ValueSpec)
		if !ok || len(vs.Values) != len(vs.Names) {
			continue
		}
		for i, n := range vs.Names {
			into[n.Name] = vs.Values[i]
		}
	}
}

func (p *pkg) addCalls(f *ast.File, fn *ast.FuncDecl) {
	if fn.Body == nil {
		return
	}
	var stack []ast.Node
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		if call, ok := n.(*ast.CallExpr); ok {
			p.calls = append(p.calls, callSite{file: f, fn: fn, stack: append([]ast.Node(nil), stack...), call: call})
		}
		stack = append(stack, n)
		return true
	})
}

func (p *pkg) position(n ast.Node) string {
	pos := p.fset.Position(n.Pos())
	name := pos.Filename
	if rel, err := filepath.Rel(p.root, name); err == nil {
		name = rel
	}
	return fmt.Sprintf("%s:%d", filepath.ToSlash(name), pos.Line)
}

// isShellBlock reports whether a call is docblock.ShellBlock.
func (p *pkg) isShellBlock(site callSite) bool {
	name, ok := p.docblockNames[site.file]
	if !ok {
		return false
	}
	sel, ok := site.call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == name && sel.Sel.Name == "ShellBlock"
}

// envs returns the bindings a call site runs under: one per call of its function in the
// package (its parameters read there) and per row of each range loop around it.
func (p *pkg) envs(site callSite, depth int) []bindings {
	out := []bindings{{}}
	if depth < maxDepth && paramCount(site.fn) > 0 {
		var callers []bindings
		for _, c := range p.calls {
			id, ok := c.call.Fun.(*ast.Ident)
			if !ok || id.Name != site.fn.Name.Name || len(c.call.Args) != paramCount(site.fn) {
				continue
			}
			for _, ce := range p.envs(c, depth+1) {
				// The name "" holds the call of the wrapper, where a reader finds the page and key.
				e := bindings{"": {s: p.position(c.call)}}
				for i, name := range paramNames(site.fn) {
					if v, err := p.eval(c.call.Args[i], c, ce, depth+1); err == nil {
						e[name] = v
					}
				}
				callers = append(callers, e)
			}
		}
		if len(callers) > 0 {
			out = callers
		}
	}
	for _, n := range site.stack {
		r, ok := n.(*ast.RangeStmt)
		if !ok {
			continue
		}
		v, ok := r.Value.(*ast.Ident)
		if !ok {
			continue
		}
		rows := p.rows(r.X, site)
		if rows == nil {
			continue
		}
		var next []bindings
		for _, e := range out {
			for _, row := range rows {
				ne := bindings{}
				for k, x := range e {
					ne[k] = x
				}
				if rv, err := p.eval(row, site, e, depth); err == nil {
					ne[v.Name] = rv
				}
				next = append(next, ne)
			}
		}
		out = next
	}
	return out
}

// rows returns the elements of a composite literal a range loop ranges over, directly or
// through a variable.
func (p *pkg) rows(x ast.Expr, site callSite) []ast.Expr {
	if id, ok := x.(*ast.Ident); ok {
		if d := p.local(id.Name, site); d != nil {
			x = d
		} else if d, ok := p.decls[id.Name]; ok {
			x = d
		}
	}
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	return lit.Elts
}

func paramNames(fn *ast.FuncDecl) []string {
	var names []string
	for _, f := range fn.Type.Params.List {
		if len(f.Names) == 0 {
			names = append(names, "_")
		}
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
	}
	return names
}

func paramCount(fn *ast.FuncDecl) int { return len(paramNames(fn)) }

// eval reads an expression of a call site's function under e.
func (p *pkg) eval(x ast.Expr, site callSite, e bindings, depth int) (value, error) {
	if depth > maxDepth {
		return value{}, fmt.Errorf("%s is too deep to read", p.position(x))
	}
	switch x := x.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return value{}, fmt.Errorf("%s is not a string", x.Value)
		}
		s, err := strconv.Unquote(x.Value)
		return value{s: s}, err
	case *ast.CompositeLit:
		return value{row: x}, nil
	case *ast.ParenExpr:
		return p.eval(x.X, site, e, depth)
	case *ast.Ident:
		return p.evalIdent(x, site, e, depth)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return value{}, fmt.Errorf("%s: only + of strings is read", p.position(x))
		}
		l, err := p.eval(x.X, site, e, depth)
		if err != nil {
			return value{}, err
		}
		r, err := p.eval(x.Y, site, e, depth)
		return value{s: l.s + r.s}, err
	case *ast.SelectorExpr:
		return p.evalField(x, site, e, depth)
	case *ast.CallExpr:
		return p.evalCall(x, site, e, depth)
	}
	return value{}, fmt.Errorf("%s: %T is not read", p.position(x), x)
}

func (p *pkg) evalIdent(x *ast.Ident, site callSite, e bindings, depth int) (value, error) {
	if v, ok := e[x.Name]; ok {
		return v, nil
	}
	if d := p.local(x.Name, site); d != nil {
		return p.eval(d, site, e, depth+1)
	}
	if d, ok := p.decls[x.Name]; ok {
		return p.eval(d, callSite{file: site.file}, bindings{}, depth+1)
	}
	return value{}, fmt.Errorf("%s: %s is not read (not a constant, a local variable, a table field or a parameter read at each call)", p.position(x), x.Name)
}

// evalField reads row.Field of a table row.
func (p *pkg) evalField(x *ast.SelectorExpr, site callSite, e bindings, depth int) (value, error) {
	row, err := p.eval(x.X, site, e, depth)
	if err != nil {
		return value{}, err
	}
	if row.row == nil {
		return value{}, fmt.Errorf("%s: %s is not a field of a table row", p.position(x), x.Sel.Name)
	}
	for _, el := range row.row.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == x.Sel.Name {
			return p.eval(kv.Value, site, e, depth+1)
		}
	}
	return value{}, fmt.Errorf("%s: the row has no field %s", p.position(row.row), x.Sel.Name)
}

// evalCall reads filepath.Join and a call of a package function whose body only returns.
func (p *pkg) evalCall(x *ast.CallExpr, site callSite, e bindings, depth int) (value, error) {
	args := make([]string, len(x.Args))
	for i, a := range x.Args {
		v, err := p.eval(a, site, e, depth)
		if err != nil {
			return value{}, err
		}
		args[i] = v.s
	}
	if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
		if pk, ok := sel.X.(*ast.Ident); ok && pk.Name == "filepath" && sel.Sel.Name == "Join" {
			return value{s: filepath.Join(args...)}, nil
		}
	}
	var fn *ast.FuncDecl
	if id, ok := x.Fun.(*ast.Ident); ok {
		fn = p.funcs[id.Name]
	}
	if fn == nil || len(fn.Body.List) != 1 || paramCount(fn) != len(args) {
		return value{}, fmt.Errorf("%s: the call is not read (only filepath.Join and package functions that only return)", p.position(x))
	}
	ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return value{}, fmt.Errorf("%s: %s does more than return one value", p.position(x), fn.Name.Name)
	}
	inner := bindings{}
	for i, name := range paramNames(fn) {
		inner[name] = value{s: args[i]}
	}
	return p.eval(ret.Results[0], callSite{file: site.file, fn: fn}, inner, depth+1)
}

// local returns the expression a local variable or constant of the call site's function is
// given: the last `name := x`, `var name = x` or `const name = x` before the call.
func (p *pkg) local(name string, site callSite) ast.Expr {
	if site.fn == nil || site.fn.Body == nil {
		return nil
	}
	var found ast.Expr
	limit := token.Pos(-1)
	if site.call != nil {
		limit = site.call.Pos()
	}
	ast.Inspect(site.fn.Body, func(n ast.Node) bool {
		if n == nil || (limit >= 0 && n.Pos() >= limit) {
			return false
		}
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE && len(n.Lhs) == len(n.Rhs) {
				for i, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Name == name {
						found = n.Rhs[i]
					}
				}
			}
		case *ast.GenDecl:
			m := map[string]ast.Expr{}
			p.addValues(n, m)
			if d, ok := m[name]; ok {
				found = d
			}
		}
		return true
	})
	return found
}
