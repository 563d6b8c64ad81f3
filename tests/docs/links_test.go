package docs

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// block is a run of lines of a Markdown file outside fenced code blocks,
// up to a blank line or a fence, with the line it begins on.
type block struct {
	line int
	text string
}

// blocks splits a Markdown file into the runs of text outside fenced code
// blocks and the lines inside them.
func blocks(md string) (text []block, fenced []ref) {
	var para []string
	start := 0 // the line of para's first line, from 1
	flush := func() {
		if len(para) > 0 {
			text = append(text, block{line: start, text: strings.Join(para, "\n")})
		}
		para = nil
	}
	inFence := false
	for i, l := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "```"):
			flush()
			inFence = !inFence
		case inFence:
			fenced = append(fenced, ref{line: i + 1, text: l})
		case strings.TrimSpace(l) == "":
			flush()
		default:
			if len(para) == 0 {
				start = i + 1
			}
			para = append(para, l)
		}
	}
	flush()
	return text, fenced
}

// blankCode replaces the inline code spans of s (a run of n backticks up
// to the next run of exactly n) with spaces, keeping line breaks, so that
// what a span holds is not taken for a link.
func blankCode(s string) string {
	b := []byte(s)
	run := func(i int) int {
		j := i
		for j < len(b) && b[j] == '`' {
			j++
		}
		return j
	}
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		open := run(i)
		closing := -1
		for k := open; k < len(b); {
			if b[k] != '`' {
				k++
				continue
			}
			m := run(k)
			if m-k == open-i {
				closing = m
				break
			}
			k = m
		}
		if closing < 0 {
			i = open
			continue
		}
		for x := i; x < closing; x++ {
			if b[x] != '\n' {
				b[x] = ' '
			}
		}
		i = closing
	}
	return string(b)
}

var (
	// linkRE: [text](target) or ![alt](target), with an optional title;
	// the text may hold one level of brackets and span lines.
	linkRE = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// linkDefRE: a reference definition, [label]: target.
	linkDefRE = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?([^\s<>]+)>?`)
	schemeRE  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	atxRE     = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextRE  = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	inlineRE  = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)`)
	tagRE     = regexp.MustCompile(`<[^>]+>`)
	orderedRE = regexp.MustCompile(`^\d+[.)] `)
)

// links returns the link targets of a Markdown file outside code, with
// the line each is on.
func links(md string) []ref {
	text, _ := blocks(md)
	var out []ref
	for _, b := range text {
		t := blankCode(b.text)
		for _, re := range []*regexp.Regexp{linkRE, linkDefRE} {
			for _, m := range re.FindAllStringSubmatchIndex(t, -1) {
				out = append(out, ref{line: b.line + strings.Count(t[:m[0]], "\n"), text: t[m[2]:m[3]]})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].line < out[j].line })
	return out
}

// slug is GitHub's anchor for a heading's text: inline links reduced to
// their text, tags dropped, lower case, each space a '-', and every other
// rune but letters, digits, '-' and '_' dropped.
func slug(heading string) string {
	heading = inlineRE.ReplaceAllString(heading, "$1")
	heading = tagRE.ReplaceAllString(heading, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown file's headings, ATX (# ...)
// and setext (a line under a paragraph's one line); a repeated anchor
// gets -1, -2, ... as on GitHub.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	add := func(h string) {
		s := slug(h)
		a := s
		for n := 1; out[a]; n++ {
			a = fmt.Sprintf("%s-%d", s, n)
		}
		out[a] = true
	}
	text, _ := blocks(md)
	for _, b := range text {
		lines := strings.Split(b.text, "\n")
		for i, l := range lines {
			if m := atxRE.FindStringSubmatch(l); m != nil {
				add(m[2])
				continue
			}
			if i == 1 && setextRE.MatchString(l) && plainLine(lines[0]) {
				add(strings.TrimSpace(lines[0]))
			}
		}
	}
	return out
}

// plainLine: a line a setext underline makes a heading of, not a list
// item, a table row or a quote.
func plainLine(l string) bool {
	t := strings.TrimSpace(l)
	for _, p := range []string{"- ", "* ", "+ ", "|", ">", "#"} {
		if strings.HasPrefix(t, p) {
			return false
		}
	}
	return !orderedRE.MatchString(t)
}

// linkProblem says why target, a link in the file at rel (relative to
// root), does not lead to a file of the repository or to a heading of it,
// or "" when it does or is not a relative link.
func linkProblem(root, rel, target string, anchorsOf func(string) (map[string]bool, error)) string {
	if target == "" || schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	path, frag, _ := strings.Cut(target, "#")
	path, _, _ = strings.Cut(path, "?")
	p, err := url.PathUnescape(path)
	if err != nil {
		return fmt.Sprintf("%q is not a valid path: %v", path, err)
	}
	file := rel
	if p != "" {
		if strings.HasPrefix(p, "/") {
			file = filepath.Clean(strings.TrimPrefix(p, "/"))
		} else {
			file = filepath.Join(filepath.Dir(rel), p)
		}
	}
	if file == ".." || strings.HasPrefix(file, "../") {
		return "leads out of the repository"
	}
	info, err := os.Stat(filepath.Join(root, file))
	if err != nil {
		return "no file " + file
	}
	if frag == "" || info.IsDir() || !strings.HasSuffix(file, ".md") {
		return ""
	}
	as, err := anchorsOf(file)
	if err != nil {
		return err.Error()
	}
	if !as[frag] {
		return fmt.Sprintf("no heading #%s in %s", frag, file)
	}
	return ""
}

var (
	makeTargetRE = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*::?(?:[^:=]|$)`)
	includeRE    = regexp.MustCompile(`^-?include[ \t]+(.+)$`)
	assignRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	shellSepRE   = regexp.MustCompile(`&&|\|\||[;|]`)
)

// makeTargets returns the targets a Makefile and the files it includes
// define: the names before ':' of a rule line, not of an assignment
// (X := y). Included names holding a variable are not followed.
func makeTargets(root, makefile string) (map[string]bool, error) {
	out := map[string]bool{}
	seen := map[string]bool{}
	var read func(path string) error
	read = func(path string) error {
		if seen[path] {
			return nil
		}
		seen[path] = true
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if m := includeRE.FindStringSubmatch(l); m != nil {
				for _, pattern := range strings.Fields(m[1]) {
					if strings.Contains(pattern, "$") {
						continue
					}
					files, _ := filepath.Glob(filepath.Join(root, pattern))
					for _, f := range files {
						if err := read(f); err != nil {
							return err
						}
					}
				}
				continue
			}
			if m := makeTargetRE.FindStringSubmatch(l); m != nil {
				for _, t := range strings.Fields(m[1]) {
					out[t] = true
				}
			}
		}
		return nil
	}
	return out, read(filepath.Join(root, makefile))
}

// makeOptArg are make's options whose value is the next word.
var makeOptArg = map[string]bool{"-C": true, "-f": true, "-I": true, "-j": true, "-l": true, "-o": true, "-W": true}

// makeCalls returns the targets the make commands in a piece of shell name:
// each command (split at ;, &&, ||, |) whose program, past sudo, env and
// assignments, is make; its words that are neither options nor
// assignments. A '#' after a space starts a comment.
func makeCalls(code string) []string {
	var out []string
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		for _, cmd := range shellSepRE.Split(line, -1) {
			words := strings.Fields(cmd)
			for len(words) > 0 && (words[0] == "sudo" || words[0] == "env" || assignRE.MatchString(words[0])) {
				words = words[1:]
			}
			if len(words) == 0 || words[0] != "make" {
				continue
			}
			for i := 1; i < len(words); i++ {
				w := words[i]
				switch {
				case makeOptArg[w]:
					i++
				case strings.HasPrefix(w, "-"), strings.Contains(w, "="):
				default:
					out = append(out, w)
				}
			}
		}
	}
	return out
}

// Every relative link of every doc leads to a file of the repository and,
// with #anchor into a Markdown file, to one of its headings; every
// `make TARGET` a doc names is a target of the Makefile.
func TestLinksAndMakeTargets(t *testing.T) {
	targets, err := makeTargets(root, "Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !targets["test"] || !targets["build"] {
		t.Fatalf("Makefile: found no build or test target in %v", targets)
	}
	cache := map[string]map[string]bool{}
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := cache[rel]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		cache[rel] = anchors(string(b))
		return cache[rel], nil
	}
	checked := 0
	for _, pattern := range docFiles {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil || len(files) == 0 {
			t.Errorf("%s: no such file", pattern)
			continue
		}
		for _, file := range files {
			rel, _ := filepath.Rel(root, file)
			t.Run(rel, func(t *testing.T) {
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range links(string(b)) {
					checked++
					if p := linkProblem(root, rel, l.text, anchorsOf); p != "" {
						t.Errorf("%s:%d: link %s: %s", rel, l.line, l.text, p)
					}
				}
				_, fenced := blocks(string(b))
				for _, c := range append(spans(string(b)), fenced...) {
					for _, target := range makeCalls(c.text) {
						if !targets[target] {
							t.Errorf("%s:%d: make %s: no target %s in the Makefile or the files it includes", rel, c.line, target, target)
						}
					}
				}
			})
		}
	}
	if checked == 0 {
		t.Error("the docs hold no relative link: the link check found nothing to check")
	}
}

// The checks on made-up files: a broken link and a missing target are
// found, the rest passes.
func TestLinkChecksOnAMadeUpRepository(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## The node's side: PlexusNode\n\n### `cni-args`\n\n## Twice\n\n## Twice\n\nSetext\n------\n")
	write("Makefile", "X := 1\nZ::=3\nall: build\nbuild:\n\t@true\ninclude mk/*.mk\n")
	write("mk/ext.mk", ".PHONY: ext-test\next-test: build\nY ?= 2\n")
	anchorsOf := func(rel string) (map[string]bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			return nil, err
		}
		return anchors(string(b)), nil
	}
	for _, tc := range []struct {
		from, target string
		bad          bool
	}{
		{"README.md", "docs/a.md", false},
		{"README.md", "docs/a.md#the-nodes-side-plexusnode", false},
		{"docs/b.md", "a.md#cni-args", false},
		{"docs/b.md", "a.md#twice-1", false},
		{"docs/b.md", "a.md#setext", false},
		{"docs/a.md", "#a", false},
		{"docs/a.md", "../Makefile", false},
		{"docs/a.md", "../mk", false},
		{"docs/a.md", "https://example.com/x.md#nowhere", false},
		{"docs/a.md", "mailto:someone@example.com", false},
		{"docs/b.md", "c.md", true},
		{"docs/b.md", "a.md#twice-2", true},
		{"docs/b.md", "a.md#The-Nodes-Side", true},
		{"docs/a.md", "#nowhere", true},
		{"docs/a.md", "../../outside.md", true},
		{"README.md", "a.md", true},
	} {
		if got := linkProblem(dir, tc.from, tc.target, anchorsOf) != ""; got != tc.bad {
			t.Errorf("linkProblem(%s, %s) = %q, want a problem: %v", tc.from, tc.target, linkProblem(dir, tc.from, tc.target, anchorsOf), tc.bad)
		}
	}

	targets, err := makeTargets(dir, "Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"all": true, "build": true, "ext-test": true, "X": false, "Y": false, "Z": false, "include": false} {
		if targets[name] != want {
			t.Errorf("makeTargets: %s is a target: %v, want %v", name, targets[name], want)
		}
	}
	for code, want := range map[string]string{
		"make build k8s-bins":                       "build k8s-bins",
		"make image-push IMAGE=registry/plexus:v1":  "image-push",
		"sudo env A=1 make -C sub -j 4 test # note": "test",
		"cd sdk && make lint; make":                 "lint",
		"$ make demo   # a pod":                     "demo",
		"go test ./... | make-report":               "",
		"make":                                      "",
	} {
		if got := strings.Join(makeCalls(code), " "); got != want {
			t.Errorf("makeCalls(%q) = %q, want %q", code, got, want)
		}
	}

	md := "See [a](docs/a.md) and [`x`](docs/b.md#y),\n[split\ntext](c.md). `[not](a link)`\n\n```sh\n[not](either)\n```\n\n![img](i.png)\n\n[ref]: r.md\n"
	var got []string
	for _, l := range links(md) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.text))
	}
	if want := "1:docs/a.md 1:docs/b.md#y 2:c.md 9:i.png 11:r.md"; strings.Join(got, " ") != want {
		t.Errorf("links = %q, want %q", strings.Join(got, " "), want)
	}
}
