package main

import (
	"bytes"
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
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The documentation the docs tests keep true: the README and every page of
// docs/, relative to the module root.
const moduleRoot = "../.."

// docFiles returns the README and docs/*.md, relative to the module root.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(moduleRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md")
	}
	files := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(moduleRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	return files
}

// mdBlock is one code block of a Markdown file.
type mdBlock struct {
	lang  string // the fence's info string; "" for an indented block
	fence bool
	line  int // of its first line in the file, from 1
	text  string
}

// mdDoc is a Markdown file split into its code blocks and its prose.
type mdDoc struct {
	blocks []mdBlock
	prose  []string // paragraphs (runs of non-blank lines outside code blocks), lines joined by spaces
}

// splitMarkdown splits src into fenced and indented code blocks and prose
// paragraphs: as much Markdown as the README and docs/ use.
func splitMarkdown(src string) mdDoc {
	var d mdDoc
	lines := strings.Split(src, "\n")
	var para []string
	flush := func() {
		if len(para) > 0 {
			d.prose = append(d.prose, strings.Join(para, " "))
			para = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "```"):
			flush()
			b := mdBlock{lang: strings.TrimSpace(strings.TrimPrefix(l, "```")), fence: true, line: i + 2}
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			b.text = strings.Join(body, "\n")
			d.blocks = append(d.blocks, b)
		case strings.HasPrefix(l, "    ") && len(para) == 0:
			// An indented code block starts after a blank line (or a
			// heading) and runs to the next line that is neither
			// indented nor blank.
			b := mdBlock{line: i + 1}
			var body []string
			for ; i < len(lines) && (strings.HasPrefix(lines[i], "    ") || strings.TrimSpace(lines[i]) == ""); i++ {
				body = append(body, strings.TrimPrefix(lines[i], "    "))
			}
			i--
			b.text = strings.Join(body, "\n")
			d.blocks = append(d.blocks, b)
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#"):
			flush()
		default:
			para = append(para, strings.TrimSpace(l))
		}
	}
	flush()
	return d
}

// docCommand is one fastmq command line found in the documentation.
type docCommand struct {
	where string // file:line, or file and the inline code span
	args  []string
}

var (
	inlineCode = regexp.MustCompile("`([^`]+)`")
	// A command starts at "fastmq" or "go run ./cmd/fastmq" as a word of
	// its own, followed by a space: not fastmq.New, fastmq-acl or
	// fastmq_disk_free_bytes.
	commandStart = regexp.MustCompile(`(?:^|[\s(])(?:go run \./cmd/fastmq|fastmq) `)
	// What ends a command on a shell line: a pipe (but not " | " between
	// two alternative options, as in "[--from N | --since T]"), a
	// comment, a redirection, a list operator.
	commandEnd = regexp.MustCompile(` (?:\||#|<|>|&&|&)(?: |$)|;`)
)

// commandEndIn returns where the command at the start of rest ends.
func commandEndIn(rest string) int {
	for off := 0; ; {
		loc := commandEnd.FindStringIndex(rest[off:])
		if loc == nil {
			return len(rest)
		}
		end := off + loc[0]
		if strings.HasPrefix(rest[end:], " | --") {
			off = end + len(" | ")
			continue
		}
		return end
	}
}

// commandsIn returns the fastmq commands in one shell line.
func commandsIn(where, line string) []docCommand {
	var cmds []docCommand
	for _, loc := range commandStart.FindAllStringIndex(line, -1) {
		rest := line[loc[1]:]
		rest = rest[:commandEndIn(rest)]
		if args := strings.Fields(rest); len(args) > 0 {
			cmds = append(cmds, docCommand{where: where, args: args})
		}
	}
	return cmds
}

// docCommands returns every fastmq command of file, whose text is src: in
// shell code blocks (every line of an indented block, the "$ " lines of a
// fenced one, with continuation lines joined) and in inline code.
func docCommands(file, src string) []docCommand {
	d := splitMarkdown(src)
	var cmds []docCommand
	for _, b := range d.blocks {
		if b.lang == "go" {
			continue
		}
		lines := strings.Split(b.text, "\n")
		for i := 0; i < len(lines); i++ {
			n := i
			l := lines[i]
			for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
				i++
				l = strings.TrimSuffix(l, `\`) + " " + strings.TrimSpace(lines[i])
			}
			if b.fence {
				// A fenced block shows a session: commands after "$ ", the
				// rest is output.
				var ok bool
				if l, ok = strings.CutPrefix(l, "$ "); !ok {
					continue
				}
			}
			cmds = append(cmds, commandsIn(fmt.Sprintf("%s:%d", file, b.line+n), l)...)
		}
	}
	for _, p := range d.prose {
		for _, m := range inlineCode.FindAllStringSubmatch(p, -1) {
			cmds = append(cmds, commandsIn(fmt.Sprintf("%s: `%s`", file, m[1]), m[1])...)
		}
	}
	return cmds
}

// checkCommand resolves args in the command tree under root: the
// subcommands it names must exist and every --flag it shows must be one
// of the command's flags.
func checkCommand(root *cobra.Command, args []string) error {
	cmd := root
	i := 0
	for ; i < len(args); i++ {
		var next *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == args[i] || c.HasAlias(args[i]) {
				next = c
			}
		}
		if next == nil {
			break
		}
		cmd = next
	}
	if cmd == root {
		return fmt.Errorf("no command %q", args[0])
	}
	if i < len(args) && cmd.HasSubCommands() && !cmd.Runnable() && isWord(args[i]) {
		return fmt.Errorf("%q has no subcommand %q", cmd.CommandPath(), args[i])
	}
	cmd.InitDefaultHelpFlag()
	for _, a := range args[i:] {
		// Options are shown as [--a N --b N] and alternatives as
		// --a|--b; a value may follow an =.
		for _, f := range strings.Split(strings.Trim(a, "[]()."), "|") {
			f = strings.Trim(f, "[]")
			name, ok := strings.CutPrefix(f, "--")
			if !ok || name == "" {
				continue
			}
			name, _, _ = strings.Cut(name, "=")
			if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
				return fmt.Errorf("%q has no flag --%s", cmd.CommandPath(), name)
			}
		}
	}
	return nil
}

// isWord reports whether a is a word that could name a subcommand, not a
// flag or a placeholder such as "…" or "...".
func isWord(a string) bool {
	return a != "" && (a[0] >= 'a' && a[0] <= 'z')
}

// TestDocsCommands: every fastmq subcommand and flag the README and docs/
// show exists in the command tree.
func TestDocsCommands(t *testing.T) {
	n := 0
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(filepath.Join(moduleRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range docCommands(f, string(src)) {
			n++
			if testing.Verbose() {
				t.Logf("%s: fastmq %s", c.where, strings.Join(c.args, " "))
			}
			if err := checkCommand(rootCmd, c.args); err != nil {
				t.Errorf("%s: fastmq %s: %v", c.where, strings.Join(c.args, " "), err)
			}
		}
	}
	// The extraction itself must not rot into finding nothing.
	if n < 60 {
		t.Errorf("found %d fastmq commands in the docs; the extraction is broken", n)
	}
}

// TestDocsCommandsCatchDrift: the checker refuses a flag, a command and a
// subcommand that do not exist, in a block and inline, so TestDocsCommands
// fails when the docs drift from the command tree.
func TestDocsCommandsCatchDrift(t *testing.T) {
	md := "Run it:\n\n    fastmq consume --stream s --no-such-flag\n    fastmq frobnicate --x\n\n" +
		"and `fastmq group frob --stream s` or `fastmq dlq ls --stream s [--no-such-option N]`.\n\n" +
		"```\n$ go run ./cmd/fastmq demo --no-such-demo-flag\noutput: fastmq nonsense\n```\n"
	var errs []string
	for _, c := range docCommands("x.md", md) {
		if err := checkCommand(rootCmd, c.args); err != nil {
			errs = append(errs, err.Error())
		}
	}
	want := []string{
		`"fastmq consume" has no flag --no-such-flag`,
		`no command "frobnicate"`,
		`"fastmq demo" has no flag --no-such-demo-flag`,
		`"fastmq group" has no subcommand "frob"`,
		`"fastmq dlq ls" has no flag --no-such-option`,
	}
	if strings.Join(errs, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(want, "\n"))
	}
	if got := commandsIn("x", "fastmq spool read --dir D [--from N | --since T] | fastmq spool append --dir E # --nope"); len(got) != 2 ||
		strings.Join(got[0].args, " ") != "spool read --dir D [--from N | --since T]" || strings.Join(got[1].args, " ") != "spool append --dir E" {
		t.Errorf("commands of a pipeline: %+v", got)
	}
	if err := checkCommand(rootCmd, []string{"consume", "--visible-before-sync", "--group", "g", "--from", "earliest"}); err != nil {
		t.Errorf("a correct command: %v", err)
	}
}

// TestDocsReadmeFrontDoor: the README stays a front door (at most 250
// lines) and shows the two commands exactly, the second being the test
// command CI runs.
func TestDocsReadmeFrontDoor(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), "\n"); n > 250 {
		t.Errorf("README.md has %d lines; the manual's pages go in docs/ (at most 250 here)", n)
	}
	var shown []string
	for _, b := range splitMarkdown(string(src)).blocks {
		if !b.fence {
			shown = append(shown, strings.TrimSpace(b.text))
		}
	}
	for _, want := range []string{"go run ./cmd/fastmq demo", "go test -race ./..."} {
		found := false
		for _, s := range shown {
			found = found || s == want
		}
		if !found {
			t.Errorf("README.md does not show %q as a command block of its own", want)
		}
	}
	ci, err := os.ReadFile(filepath.Join(moduleRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^go test -race \./\.\.\.$`).Match(ci) {
		t.Errorf(".ci/run does not run the README's test command, go test -race ./...")
	}
}

// mdLink finds a Markdown link's or image's target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks: every relative link of the README and docs/ points at a
// file of the repository, and a #fragment into a Markdown page at one of
// its headings.
func TestDocsLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	n := 0
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(filepath.Join(moduleRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(src), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			path, frag, _ := strings.Cut(target, "#")
			file := f
			if path != "" {
				file = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(filepath.Join(moduleRoot, file)); err != nil {
					t.Errorf("%s: link to %s: %v", f, target, err)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if anchors[file] == nil {
				anchors[file] = headingAnchors(t, file)
			}
			if !anchors[file][frag] {
				t.Errorf("%s: link to %s: %s has no heading #%s", f, target, file, frag)
			}
		}
	}
	if n < 20 {
		t.Errorf("found %d relative links; the extraction is broken", n)
	}
}

// headingAnchors returns the anchors GitHub makes of file's headings:
// lower case, punctuation dropped, spaces as dashes.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(moduleRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	a := map[string]bool{}
	inFence := false
	for _, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a[b.String()] = true
	}
	return a
}

// readmeGoPrelude declares what the README's Go snippets use without
// defining it, as parameters of the function each snippet becomes the body
// of. A snippet that starts using another name fails "undefined" until it
// is added here.
const readmeGoPrelude = `package readme

import (
	"bytes"
	"context"
	"time"

	"github.com/fastmq/fastmq"
	"github.com/fastmq/fastmq/patterns/group"
	"github.com/fastmq/fastmq/patterns/rpc"
	"github.com/fastmq/fastmq/socket"
)

func snippet(ctx context.Context, meshKey []byte, line string, process func(publisher string, offset uint64, value []byte),
	node, other *fastmq.Node, handle func(value []byte) error) {
`

// TestDocsReadmeGo: each Go snippet of the README type-checks against
// today's API, as the body of a function (unused variables and imports
// aside: a snippet shows, it does not use everything it gets).
func TestDocsReadmeGo(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var snippets []mdBlock
	for _, b := range splitMarkdown(string(src)).blocks {
		if b.lang == "go" {
			snippets = append(snippets, b)
		}
	}
	if len(snippets) == 0 {
		t.Fatal("the README has no Go snippet")
	}
	imp := exportImporter(t, "github.com/fastmq/fastmq", "github.com/fastmq/fastmq/patterns/group",
		"github.com/fastmq/fastmq/patterns/rpc", "github.com/fastmq/fastmq/socket", "bytes", "context", "time")
	for _, b := range snippets {
		if errs := typeCheckSnippet(imp, b.text); len(errs) > 0 {
			t.Errorf("README.md:%d: the Go snippet does not compile against today's API:\n\t%s", b.line, strings.Join(errs, "\n\t"))
		}
	}
}

// TestDocsReadmeGoCatchesDrift: a snippet calling a method that does not
// exist, or a config field that does not, is refused.
func TestDocsReadmeGoCatchesDrift(t *testing.T) {
	imp := exportImporter(t, "github.com/fastmq/fastmq", "github.com/fastmq/fastmq/patterns/group",
		"github.com/fastmq/fastmq/patterns/rpc", "github.com/fastmq/fastmq/socket", "bytes", "context", "time")
	for _, bad := range []string{
		`node.ServeEverything()`,
		`c, err := node.Consume(fastmq.ConsumerConfig{Stream: "s", Topic: "x"})`,
	} {
		if errs := typeCheckSnippet(imp, bad); len(errs) == 0 {
			t.Errorf("%s: no error", bad)
		}
	}
	if errs := typeCheckSnippet(imp, `off, err := node.Publish(ctx, "s", []byte(line))`); len(errs) > 0 {
		t.Errorf("a correct snippet: %v", errs)
	}
}

// typeCheckSnippet type-checks body as the body of readmeGoPrelude's
// function and returns its errors, soft ones (unused variables and
// imports) left out.
func typeCheckSnippet(imp types.Importer, body string) []string {
	src := readmeGoPrelude + body + "\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "README.go", src, parser.SkipObjectResolution)
	if err != nil {
		return []string{err.Error()}
	}
	prelude := strings.Count(readmeGoPrelude, "\n")
	var errs []string
	conf := types.Config{Importer: imp, Error: func(err error) {
		te, ok := err.(types.Error)
		if !ok {
			errs = append(errs, err.Error())
			return
		}
		if te.Soft {
			return
		}
		errs = append(errs, fmt.Sprintf("snippet line %d: %s", fset.Position(te.Pos).Line-prelude, te.Msg))
	}}
	_, _ = conf.Check("readme", fset, []*ast.File{f}, nil)
	return errs
}

// exportImporter returns an importer that reads the compiler's export data
// of pkgs and their dependencies, located (and built if need be) by go list.
func exportImporter(t *testing.T, pkgs ...string) types.Importer {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build export data with")
	}
	cmd := exec.Command(goTool, append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, pkgs...)...)
	cmd.Dir = moduleRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(l, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q (import it in readmeGoPrelude)", path)
		}
		return os.Open(file)
	})
}
