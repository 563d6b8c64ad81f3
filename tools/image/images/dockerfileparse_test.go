package images

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
)

// dockerfile is what a FROM scratch Dockerfile of deploy/Dockerfile's kind
// says its image holds, as an engine builds it.
type dockerfile struct {
	files      map[string]copied // path in the image -> source
	dirs       map[string]bool   // directories the engine creates (0755, 0:0)
	entrypoint []string
	cmd        []string
	env        []string
	labels     map[string]string
	user       string
	workdir    string
}

type copied struct {
	src  string // relative to the build context
	mode fs.FileMode
}

// buildKitPath is the PATH BuildKit gives an image that sets none.
const buildKitPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// parseDockerfile reads the subset of the Dockerfile language the plexus
// image needs, and refuses anything else rather than ignore it: a test
// comparing the image with what it cannot read would prove nothing.
func parseDockerfile(text string, buildArgs map[string]string) (*dockerfile, error) {
	df := &dockerfile{files: map[string]copied{}, dirs: map[string]bool{}, labels: map[string]string{}}
	args := map[string]string{}
	sawFrom := false
	for _, ins := range instructions(text) {
		word, rest, _ := strings.Cut(ins.text, " ")
		word, rest = strings.ToUpper(word), strings.TrimSpace(rest)
		where := fmt.Sprintf("line %d: %s", ins.line, word)
		if !sawFrom && word != "FROM" && word != "ARG" {
			return nil, fmt.Errorf("%s before FROM", where)
		}
		var err error
		switch word {
		case "FROM":
			if rest != "scratch" || sawFrom {
				err = fmt.Errorf("want one FROM scratch, got %q", rest)
			}
			sawFrom = true
		case "ARG":
			name, def, _ := strings.Cut(rest, "=")
			if v, ok := buildArgs[name]; ok {
				def = v
			}
			args[name] = def
		case "LABEL", "ENV":
			var pairs [][2]string
			pairs, err = keyValues(expand(rest, args))
			for _, kv := range pairs {
				if word == "LABEL" {
					df.labels[kv[0]] = kv[1]
					continue
				}
				df.env = slices.DeleteFunc(df.env, func(e string) bool { return strings.HasPrefix(e, kv[0]+"=") })
				df.env = append(df.env, kv[0]+"="+kv[1])
				args[kv[0]] = kv[1]
			}
		case "COPY":
			err = df.copy(strings.Fields(expand(rest, args)))
		case "ENTRYPOINT":
			err = execForm(rest, &df.entrypoint)
		case "CMD":
			err = execForm(rest, &df.cmd)
		case "USER":
			df.user = expand(rest, args)
		case "WORKDIR":
			df.workdir = expand(rest, args)
			if !path.IsAbs(df.workdir) {
				err = fmt.Errorf("%q is not absolute", df.workdir)
			}
			df.addParents(path.Join(df.workdir, "x"))
		default:
			err = fmt.Errorf("not an instruction this test reads (the image builder would have to do it too)")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	if !sawFrom {
		return nil, fmt.Errorf("no FROM")
	}
	if !slices.ContainsFunc(df.env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		df.env = append([]string{buildKitPath}, df.env...)
	}
	return df, nil
}

type instruction struct {
	line int
	text string
}

// instructions joins continued lines and drops comments and blank lines.
func instructions(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		cont := strings.HasSuffix(t, "\\")
		cur.WriteString(strings.TrimSuffix(t, "\\"))
		if cont {
			cur.WriteString(" ")
			continue
		}
		out = append(out, instruction{start, strings.TrimSpace(cur.String())})
		cur.Reset()
	}
	return out
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expand substitutes ${NAME} and $NAME (no modifiers: none is used).
func expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		return vars[name]
	})
}

// keyValues splits `k1="v 1" k2=v2` into pairs.
func keyValues(s string) ([][2]string, error) {
	var pairs [][2]string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\"") {
			return nil, fmt.Errorf("%q: want key=value", s)
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && rest[end] != '"' {
				if rest[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(rest) {
				return nil, fmt.Errorf("%q: unterminated quote", s)
			}
			v = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(rest[1:end])
			rest = rest[end+1:]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		pairs = append(pairs, [2]string{k, v})
		s = rest
	}
	return pairs, nil
}

// execForm reads a JSON array (the exec form: no shell in the image).
func execForm(s string, dst *[]string) error {
	if err := json.Unmarshal([]byte(s), dst); err != nil {
		return fmt.Errorf("%q: want the exec form, a JSON array of strings: %w", s, err)
	}
	return nil
}

// copy records `COPY --chmod=MODE src... dst`: each file at dst (or below
// dst/ for several), with its missing parents.
func (df *dockerfile) copy(words []string) error {
	var mode fs.FileMode
	haveMode := false
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		m, ok := strings.CutPrefix(words[0], "--chmod=")
		if !ok {
			return fmt.Errorf("flag %s: only --chmod is read", words[0])
		}
		var n uint32
		if _, err := fmt.Sscanf(m, "%o", &n); err != nil || n > 0o777 {
			return fmt.Errorf("--chmod=%s: want octal permission bits", m)
		}
		mode, haveMode = fs.FileMode(n), true
		words = words[1:]
	}
	if !haveMode {
		return fmt.Errorf("no --chmod: the files' modes would be the build host's")
	}
	if len(words) < 2 {
		return fmt.Errorf("want sources and a destination")
	}
	srcs, dst := words[:len(words)-1], words[len(words)-1]
	if !path.IsAbs(dst) || (len(srcs) > 1 && !strings.HasSuffix(dst, "/")) {
		return fmt.Errorf("destination %q: want an absolute path, ending in / for several sources", dst)
	}
	for _, src := range srcs {
		p := dst
		if strings.HasSuffix(dst, "/") {
			p = path.Join(dst, path.Base(src))
		}
		if _, dup := df.files[p]; dup {
			return fmt.Errorf("%s copied twice", p)
		}
		df.files[p] = copied{src: src, mode: mode}
		df.addParents(p)
	}
	return nil
}

func (df *dockerfile) addParents(p string) {
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		df.dirs[d] = true
	}
}

// readDockerfile parses the Dockerfile at file.
func readDockerfile(file string, buildArgs map[string]string) (*dockerfile, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	df, err := parseDockerfile(string(b), buildArgs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return df, nil
}
