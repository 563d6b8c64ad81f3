package images

import (
	"io/fs"
	"reflect"
	"strings"
	"testing"
)

func TestParseDockerfileReads(t *testing.T) {
	const text = `# comment
ARG V=dev
FROM scratch
LABEL a="x y" \
      b=${V}
# a comment between instructions
COPY --chmod=0750 bin/one bin/two /opt/p/
COPY --chmod=0644 conf /etc/p.conf
ENV PATH=/opt/p K="v w"
USER 1:2
WORKDIR /work
ENTRYPOINT ["/opt/p/one"]
CMD ["run", "--x"]
`
	df, err := parseDockerfile(text, map[string]string{"V": "v9"})
	if err != nil {
		t.Fatal(err)
	}
	want := &dockerfile{
		files: map[string]copied{
			"/opt/p/one":  {"bin/one", 0o750},
			"/opt/p/two":  {"bin/two", 0o750},
			"/etc/p.conf": {"conf", fs.FileMode(0o644)},
		},
		dirs:       map[string]bool{"/opt": true, "/opt/p": true, "/etc": true, "/work": true},
		entrypoint: []string{"/opt/p/one"},
		cmd:        []string{"run", "--x"},
		env:        []string{"PATH=/opt/p", "K=v w"},
		labels:     map[string]string{"a": "x y", "b": "v9"},
		user:       "1:2",
		workdir:    "/work",
	}
	if !reflect.DeepEqual(df, want) {
		t.Errorf("parsed\n %+v\nwant\n %+v", df, want)
	}
}

func TestParseDockerfileGivesBuildKitsPathWhenUnset(t *testing.T) {
	df, err := parseDockerfile("FROM scratch\nENV A=1\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{buildKitPath, "A=1"}; !reflect.DeepEqual(df.env, want) {
		t.Errorf("env %q, want %q", df.env, want)
	}
}

func TestParseDockerfileRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"a base image", "FROM debian\n", `line 1: FROM: want one FROM scratch, got "debian"`},
		{"RUN", "FROM scratch\nRUN true\n", "line 2: RUN: not an instruction"},
		{"COPY without --chmod", "FROM scratch\nCOPY a /a\n", "line 2: COPY: no --chmod"},
		{"COPY --chown", "FROM scratch\nCOPY --chown=1 --chmod=0755 a /a\n", "only --chmod"},
		{"several sources to a file", "FROM scratch\nCOPY --chmod=0755 a b /x\n", `destination "/x"`},
		{"the shell form", "FROM scratch\nENTRYPOINT /x\n", "exec form"},
		{"an instruction before FROM", "LABEL a=b\nFROM scratch\n", "line 1: LABEL before FROM"},
		{"no FROM", "ARG A\n", "no FROM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDockerfile(tc.text, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
