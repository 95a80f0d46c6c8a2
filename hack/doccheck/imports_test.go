package doccheck

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// module is the import path of the repository's main module.
const module = "github.com/navique/lockguard"

// mayImport lists, for each top-level directory whose production files
// the direction of imports binds, the top-level directories of the module
// they may import (docs/development.md, Layout: cmd/ wires, internal/ is
// the boundary). cmd/, e2e/ and hack/ may import anything.
var mayImport = map[string][]string{
	"api":        {"api"},
	"certs":      {"api", "certs"},
	"internal":   {"api", "certs", "internal"},
	"webhook":    {"api", "certs", "internal", "webhook"},
	"controller": {"api", "certs", "internal", "controller"},
}

// importExceptions are the imports against mayImport that the house
// keeps, by the importing package's directory and the imported package's
// path in the module: none (the plugin, which runs the webhook's own
// decision for `kubectl lock why`, lives under cmd/).
var importExceptions = map[string][]string{}

// TestImportDirection fails for every import of a production Go file that
// runs against the direction of imports: internal/ back up to webhook/,
// controller/ or cmd/, webhook/ and controller/ to each other, or anything
// to cmd/.
func TestImportDirection(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkImports(root, importExceptions)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// checkImports reads the imports of every production Go file under the
// directories of mayImport at root and returns a sentence for each import
// of the module that mayImport does not allow and allowed does not keep.
func checkImports(root string, allowed map[string][]string) ([]string, error) {
	var problems []string
	fset := token.NewFileSet()
	for top, may := range mayImport {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, spec := range f.Imports {
				imp, err := strconv.Unquote(spec.Path.Value)
				if err != nil {
					return err
				}
				inModule, ok := strings.CutPrefix(imp, module+"/")
				if !ok {
					continue
				}
				target, _, _ := strings.Cut(inModule, "/")
				if slices.Contains(may, target) || slices.Contains(allowed[filepath.ToSlash(filepath.Dir(rel))], inModule) {
					continue
				}
				problems = append(problems, fmt.Sprintf("%s imports %s: %s/ may import only %s/ of the module (docs/development.md, Layout)",
					rel, imp, top, strings.Join(may, "/, ")))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(problems)
	return problems, nil
}

// TestImportDirectionFail builds a repository in a temporary directory
// with imports in and against the direction, and checks that
// checkImports names exactly the ones against it that are not kept.
func TestImportDirectionFail(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"internal/a/a.go":       "webhook",    // back up
		"internal/a/a_test.go":  "webhook",    // a test may
		"internal/kept/kept.go": "webhook",    // kept
		"internal/b/b.go":       "internal/a", // sideways
		"webhook/w.go":          "controller", // across
		"controller/c.go":       "internal/a",
		"api/v1/t.go":           "cmd/lockguard/manager", // up to cmd
		"cmd/lockguard/main.go": "webhook",
		"e2e/framework/f.go":    "cmd/lockguard/manager",
	}
	for rel, imp := range files {
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		src := fmt.Sprintf("package %s\n\nimport _ %q\n", filepath.Base(filepath.Dir(path)), module+"/"+imp)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := checkImports(root, map[string][]string{"internal/kept": {"webhook"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"api/v1/t.go imports github.com/navique/lockguard/cmd/lockguard/manager: api/ may import only api/ of the module (docs/development.md, Layout)",
		"internal/a/a.go imports github.com/navique/lockguard/webhook: internal/ may import only api/, certs/, internal/ of the module (docs/development.md, Layout)",
		"webhook/w.go imports github.com/navique/lockguard/controller: webhook/ may import only api/, certs/, internal/, webhook/ of the module (docs/development.md, Layout)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checkImports(a tree with imports in and against the direction): -want, +got:\n%s", diff)
	}
}
