package thick

import (
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/config/daemonconf"
	"github.com/plexus-cni/plexus/tests/harness"
)

// TestShimReadsConfigsAsPlexusReadsThem runs the Rust shim on configs
// generated from seeds and checks that it accepts exactly the configs the
// Go parser (daemonconf, which config.Parse uses) accepts, and forwards to
// the same socket. A CHECK with plexusd absent shows both: a refused
// config is code 7, an accepted one is code 115 naming the socket.
func TestShimReadsConfigsAsPlexusReadsThem(t *testing.T) {
	dir := t.TempDir()
	seeds := []string{
		`{"cniVersion":"1.0.0","daemonSocket":"DIR/a.sock","daemonWait":"3s"}`,
		`{"daemonSocket":"DIR/b.sock","ipam":{"a":[1,-2.5e3,{"daemonSocket":"/no"}],"b":true,"c":null}}`,
		`{"daemonSocket":"DIR/c.sock","daemonSocket":null,"daemonWait":"1m30.5s"}`,
		`{"daemonSocket":"DIR\/p\u00e9\ud83d\ude00\ud800.sock","x":"\"\\\/\b\f\n\r\t"}`,
		"{\"daemonSocket\":\"DIR/\xff\xe2\x82.sock\",\"daemonWait\":\"1\u00b5s\"}",
		`{"daemonSocket":"DIR/d.sock","daemonWait":".5h"}`,
		`{"daemonSocket":"DIR/e.sock","daemonWait":"9223372036854775807ns"}`,
		`{"daemonSocket":"relative.sock"}`,
		`{"daemonSocket":5}`,
		`{"daemonWait":"-1s","daemonSocket":"DIR/f.sock"}`,
	}
	tokens := []string{"{", "}", "[", "]", `"`, `\`, ",", ":", " ", "null", "0", "01", "-1e5", ".", "s", "µs", `\u00e9`, `\ud800`, "\xff", "daemonSocket", "/", "\x01"}
	rng := rand.New(rand.NewPCG(6, 2026))
	var configs []string
	for _, s := range seeds {
		configs = append(configs, strings.ReplaceAll(s, "DIR", dir))
	}
	for len(configs) < 1000 {
		configs = append(configs, mutate(rng, configs[rng.IntN(len(seeds))], tokens))
	}
	g := &configGen{rng: rng, dir: dir}
	for len(configs) < 3000 {
		c := g.object(0, true)
		if rng.IntN(4) == 0 {
			c = mutate(rng, c, tokens)
		}
		configs = append(configs, c)
	}
	for _, conf := range configs {
		d, perr := daemonconf.Parse([]byte(conf))
		code, msg := runShimCheck(t, conf)
		switch {
		case perr != nil || d.Socket == "":
			if code != 7 {
				t.Errorf("%q: plexus refuses it (%v), the shim answered %d %q", conf, perr, code, msg)
			}
		case code != 115 || !strings.Contains(msg, "unreachable at "+d.Socket+":"):
			t.Errorf("%q: plexus reads socket %q, the shim answered %d %q", conf, d.Socket, code, msg)
		}
	}
}

// configGen writes configs, mostly valid JSON, from pieces where JSON
// parsers, Go's duration syntax and string decoding have edges.
type configGen struct {
	rng *rand.Rand
	dir string
}

var (
	genNumbers  = []string{"0", "01", "-0", "-", "1.", "1.5", "1e", "1e+", "1E-2", "-12.5e3", ".5", "00", "1.e3", "2a", "9e999", "-01.0"}
	genStrings  = []string{`"x"`, `"\u00e9"`, `"\ud800"`, `"\ud83d\ude00"`, `"\udc00\ud800"`, `"\x"`, `"\u12"`, "\"\x01\"", `"\/\b\f\n\r\t"`, `"é"`, "\"\xff\xfe\"", "\"\xe2\x82\"", `"\""`, `"`}
	genLiterals = []string{"true", "false", "null", "nul", "tru", "True"}
	genWaits    = []string{"3s", "0", "-0", "-1s", "1.5h", ".5s", "5.s", ".s", "1µs", "1μs", "1us", "10", "s", "9223372036854775807ns", "9223372036854775808ns", "-9223372036854775808ns", "1h1h", "+5m", "1.0000000000000000000001s", "", "1e3s", " 1s", "1s ", "2562047h47m16.854775807s", "2562047h47m16.854775808s", "1.2.3s", "1sm", "3000000h"}
)

func (g *configGen) pick(list []string) string { return list[g.rng.IntN(len(list))] }

func (g *configGen) value(depth int) string {
	if depth > 3 {
		return g.pick(genNumbers)
	}
	switch g.rng.IntN(5) {
	case 0:
		return g.pick(genNumbers)
	case 1:
		return g.pick(genStrings)
	case 2:
		return g.pick(genLiterals)
	case 3:
		var items []string
		for range g.rng.IntN(4) {
			items = append(items, g.value(depth+1))
		}
		return "[" + strings.Join(items, g.pick([]string{",", ", ", " ,"})) + "]"
	}
	return g.object(depth+1, false)
}

// object is a JSON object; at the top it usually names a socket.
func (g *configGen) object(depth int, top bool) string {
	var pairs []string
	if top && g.rng.IntN(8) != 0 {
		pairs = append(pairs, `"daemonSocket":`+g.socket())
	}
	for range g.rng.IntN(4) {
		var k, v string
		switch g.rng.IntN(4) {
		case 0:
			k, v = `"daemonWait"`, g.wait()
		case 1:
			k, v = `"daemonSocket"`, g.socket()
		default:
			k, v = g.pick(append([]string{`"a"`, `"cniVersion"`, `"DaemonSocket"`}, genStrings...)), g.value(depth)
		}
		pairs = append(pairs, k+g.pick([]string{":", " : "})+v)
	}
	g.rng.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	return "{" + strings.Join(pairs, ",") + "}" + g.pick([]string{"", "", "", " \n", " x", "}"})
}

func (g *configGen) socket() string {
	switch g.rng.IntN(6) {
	case 0:
		return g.pick(append([]string{`"relative.sock"`, `""`, "null", "5", `["/a"]`}, genStrings...))
	case 1:
		return `"` + g.dir + `\/s\u00e9-` + strconv.Itoa(g.rng.IntN(9)) + `.sock"`
	}
	return `"` + g.dir + "/s" + strconv.Itoa(g.rng.IntN(9)) + `.sock"`
}

func (g *configGen) wait() string {
	if g.rng.IntN(6) == 0 {
		return g.pick([]string{"null", "10", `{}`})
	}
	return `"` + g.pick(genWaits) + `"`
}

// mutate replaces, inserts or deletes a few pieces of s.
func mutate(rng *rand.Rand, s string, tokens []string) string {
	for range 1 + rng.IntN(3) {
		i := rng.IntN(len(s) + 1)
		j := min(len(s), i+rng.IntN(4))
		switch rng.IntN(3) {
		case 0:
			s = s[:i] + tokens[rng.IntN(len(tokens))] + s[j:]
		case 1:
			s = s[:i] + tokens[rng.IntN(len(tokens))] + s[i:]
		default:
			s = s[:i] + s[j:]
		}
	}
	return s
}

func runShimCheck(t *testing.T, conf string) (uint, string) {
	cmd := exec.Command(filepath.Join(harness.BinDir, "plexus-shim"))
	cmd.Env = []string{"CNI_COMMAND=CHECK", "CNI_CONTAINERID=c", "CNI_IFNAME=eth0", "CNI_NETNS=/x", "CNI_PATH=/x"}
	cmd.Stdin = strings.NewReader(conf)
	out, err := cmd.Output()
	var e harness.CNIError
	if err == nil || json.Unmarshal(out, &e) != nil {
		t.Fatalf("%q: want a CNI error, got %v %q", conf, err, out)
	}
	return e.Code, e.Msg
}
