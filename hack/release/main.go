// Command release writes the parts of a lockguard release whose bytes must
// not depend on when or where it runs (make release, hack/release/release.sh):
// the binary archives, the krew plugin manifests, the OCI image archives,
// the packaged chart's file times, SHA256SUMS and the release notes. It uses
// the standard library only, so it adds nothing to lockguard's module.
//
//	release archive -o OUT.tar.gz|OUT.zip -mtime UNIX FILE...
//	release krew -name lock -bin kubectl-lock -version V -url BASE -o lock.yaml ARCHIVE...
//	release image -repo REPO -tag TAG -version V -mtime UNIX -o PREFIX ARCH=BINARY...
//	release retime -mtime UNIX CHART.tgz
//	release sums -dir DIST
//	release notes -version V -image REPO -changelog CHANGELOG.md -readme README.md -o NOTES.md
//	release readme -block chart|krew [-readme README.md]
//	release version [-version V] [-chart Chart.yaml] [-changelog CHANGELOG.md]
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "archive":
		err = archiveCmd(args)
	case "krew":
		err = krewCmd(args)
	case "image":
		err = imageCmd(args)
	case "retime":
		err = retimeCmd(args)
	case "sums":
		err = sumsCmd(args)
	case "notes":
		err = notesCmd(args)
	case "version":
		err = versionCmd(args)
	case "readme":
		err = readmeCmd(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release archive|krew|image|retime|sums|notes|version|readme [flags] (see hack/release/main.go)")
	os.Exit(2)
}

// flags returns a FlagSet for a subcommand that fails rather than exits.
func flags(name string) *flag.FlagSet {
	return flag.NewFlagSet("release "+name, flag.ContinueOnError)
}
