package push

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadTakesTheFilesAnObjectMayHold(t *testing.T) {
	for _, tc := range []struct {
		name        string
		files       map[string]string
		wantModules []string
		wantData    []string
		wantErr     string
	}{
		{
			name:        "modules, tests and data; other files and subdirectories skipped",
			files:       map[string]string{"team.rego": "package x\n", "team_test.rego": "package x_test\n", "base.yaml": "a: 1\n", "README.md": "#", "sub/more.rego": "package y\n"},
			wantModules: []string{"team.rego", "team_test.rego"}, wantData: []string{"base.yaml"},
		},
		{name: "a policy file whose name an object may not hold", files: map[string]string{"Team.rego": "package x\n"}, wantErr: `spec.modules["Team.rego"]: not an allowed file name`},
		{name: "nothing to push", files: map[string]string{"README.md": "#"}, wantErr: "no .rego, .json, .yaml or .yml files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, _, err := Read(writeDir(t, tc.files))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Read: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(spec.Modules); strings.Join(got, ",") != strings.Join(tc.wantModules, ",") {
				t.Errorf("modules %v, want %v", got, tc.wantModules)
			}
			if got := keys(spec.Data); strings.Join(got, ",") != strings.Join(tc.wantData, ",") {
				t.Errorf("data %v, want %v", got, tc.wantData)
			}
		})
	}
}

// Verify refuses what a node would refuse, naming the file as the
// object does, not by the temporary path it was checked at.
func TestVerifyRefusesWhatANodeWould(t *testing.T) {
	lib, err := filepath.Abs(filepath.Join("..", "..", "policies", "library"))
	if err != nil {
		t.Fatal(err)
	}
	_, files, err := Read(writeDir(t, map[string]string{"broken.rego": "package x\n\nallow if {"}))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Verify(context.Background(), lib, files, "(the directory)")
	if err == nil || !strings.Contains(err.Error(), "broken.rego:") || strings.Contains(err.Error(), "plexus-push-") {
		t.Fatalf("Verify: %v, want an error naming broken.rego without its temporary path", err)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
