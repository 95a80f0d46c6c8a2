package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// readmeCmd prints the commands of one of the README's install blocks, so
// that make release-check runs them as users copy them.
func readmeCmd(args []string) error {
	fs := flags("readme")
	block := fs.String("block", "", "the block: chart or krew")
	readme := fs.String("readme", "README.md", "the README")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *block == "" {
		return errors.New("readme: want -block")
	}
	text, err := os.ReadFile(*readme)
	if err != nil {
		return err
	}
	commands, err := readmeBlock(string(text), *block)
	if err != nil {
		return fmt.Errorf("%s: %w", *readme, err)
	}
	fmt.Print(commands)
	return nil
}

// readmeBlock returns the contents of the fenced code block that follows
// the line "<!-- release-check: NAME -->" in the README text: install
// commands that the release notes repeat and make release-check runs.
func readmeBlock(text, name string) (string, error) {
	marker := "<!-- release-check: " + name + " -->"
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if line != marker {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			return "", fmt.Errorf("%s is not followed by a fenced code block", marker)
		}
		for j := i + 2; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], "```") {
				if j == i+2 {
					return "", fmt.Errorf("the block after %s is empty", marker)
				}
				return strings.Join(lines[i+2:j], "\n") + "\n", nil
			}
		}
		return "", fmt.Errorf("the block after %s is not closed", marker)
	}
	return "", fmt.Errorf("no line %s", marker)
}
