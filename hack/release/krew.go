package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// krewCmd writes a krew plugin manifest whose platforms are the ARCHIVEs,
// each with the sha256 of its bytes and its URI under -url.
func krewCmd(args []string) error {
	fs := flags("krew")
	name := fs.String("name", "", "the plugin's name: lock or unlock")
	bin := fs.String("bin", "", "the plugin's binary in the archives, without .exe")
	version := fs.String("version", "", "the release, vX.Y.Z")
	url := fs.String("url", "", "where the archives are downloaded from (the release's page)")
	out := fs.String("o", "", "the manifest to write (NAME.yaml: krew wants the file named after the plugin)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p, ok := plugins[*name]
	if !ok || *bin == "" || *version == "" || *url == "" || *out == "" || fs.NArg() == 0 {
		return errors.New("krew: want -name lock|unlock, -bin, -version, -url, -o and the archives")
	}
	p.Name, p.Version = *name, *version
	for _, a := range fs.Args() {
		osName, arch, err := platformOf(a)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(a)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		exe := *bin
		if osName == "windows" {
			exe += ".exe"
		}
		p.Platforms = append(p.Platforms, krewPlatform{
			OS: osName, Arch: arch, Bin: exe,
			URI:    strings.TrimSuffix(*url, "/") + "/" + filepath.Base(a),
			SHA256: hex.EncodeToString(sum[:]),
		})
	}
	var b strings.Builder
	if err := krewTemplate.Execute(&b, p); err != nil {
		return err
	}
	return os.WriteFile(*out, []byte(b.String()), 0o644)
}

// platformOf returns the OS and architecture of an archive named
// NAME_VERSION_OS_ARCH.tar.gz or .zip.
func platformOf(path string) (osName, arch string, err error) {
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".tar.gz"), ".zip")
	parts := strings.Split(base, "_")
	if len(parts) < 4 || base == filepath.Base(path) {
		return "", "", fmt.Errorf("archive %s: want NAME_VERSION_OS_ARCH.tar.gz or .zip", path)
	}
	return parts[len(parts)-2], parts[len(parts)-1], nil
}

type krewPlugin struct {
	Name, Version, Short, Description, Caveats string
	Platforms                                  []krewPlatform
}

type krewPlatform struct {
	OS, Arch, URI, SHA256, Bin string
}

// plugins are the two kubectl plugins, installed from the same archives.
var plugins = map[string]krewPlugin{
	"lock": {
		Short: "Protect resources against deletion with lockguard",
		Description: `Creates a lockguard Lock and returns once lockguard enforces it: on
one core.navique.com resource (kubectl lock TYPE/NAME), or on the
resources of a namespace selected by label, now or later (--selector;
--all for the whole namespace). A Lock denies their deletes
(CanNotDelete), or their changes too (--read-only: ReadOnly), or only
records what it would deny (--audit). Also lists the Locks (kubectl
lock list), shows and changes one (kubectl lock show, kubectl lock
update), deletes one by name (kubectl lock unlock), creates break-glass
exceptions (kubectl lock exception) and says why a delete is denied
(kubectl lock why); --dry-run=server asks the API server without
changing anything. kubectl unlock (its own plugin, "unlock") removes
the Locks of a resource.`,
	},
	"unlock": {
		Short: "Remove lockguard Locks protecting a resource",
		Description: `Deletes the lockguard Locks that target a core.navique.com resource,
after showing them and asking (or with --yes), and returns once its
delete is no longer denied by them. It never deletes a selector Lock,
which protects other resources too: it names it instead. kubectl lock
(its own plugin, "lock") creates Locks.`,
	},
}

const caveats = `lockguard must run in the cluster for Locks to protect anything:
install its Helm chart (lockguard-VERSION.tgz of the same release).`

var krewTemplate = template.Must(template.New("krew").Funcs(template.FuncMap{
	"indent":  func(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") },
	"caveats": func() string { return caveats },
}).Parse(`# The krew plugin manifest of kubectl {{.Name}} {{.Version}}, written by make release;
# in the release's directory, with your platform's archive (as the README says):
#   kubectl krew install --manifest={{.Name}}.yaml --archive=kubectl-lock_{{.Version}}_OS_ARCH.tar.gz
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: {{.Name}}
spec:
  version: {{.Version}}
  homepage: https://github.com/navique/lockguard
  shortDescription: {{.Short}}
  description: |
{{indent .Description}}
  caveats: |
{{indent caveats}}
  platforms:
{{- range .Platforms}}
  - selector:
      matchLabels:
        os: {{.OS}}
        arch: {{.Arch}}
    uri: {{.URI}}
    sha256: {{.SHA256}}
    files:
    - from: {{.Bin}}
      to: .
    bin: {{.Bin}}
{{- end}}
`))
