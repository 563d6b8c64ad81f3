package policies

import (
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// forbiddenBuiltins are the built-ins a plexus policy may not call, and why.
// A decision runs inside every pod's CNI ADD and must depend only on its
// input and the admin's data: no I/O, no environment, no nondeterminism
// (a retried ADD must decide the same). It covers every built-in OPA marks
// nondeterministic (TestForbiddenCoversNondeterministic); rego.parse_module,
// trace and print are pure and stay allowed.
var forbiddenBuiltins = map[string]string{
	"http.send":              "performs network I/O",
	"net.lookup_ip_addr":     "performs DNS lookups",
	"opa.runtime":            "reads the process environment and configuration",
	"time.now_ns":            "reads the clock, so a retried ADD could decide differently",
	"rand.intn":              "is random, so a retried ADD could decide differently",
	"uuid.rfc4122":           "is random, so a retried ADD could decide differently",
	"io.jwt.decode_verify":   "reads the clock to check token expiry",
	"io.jwt.encode_sign":     "is random for some algorithms",
	"io.jwt.encode_sign_raw": "is random for some algorithms",
	"json.verify_schema":     "may fetch remote schema references over the network",
	"json.match_schema":      "may fetch remote schema references over the network",
	"crypto.x509.parse_and_verify_certificates_with_options": "reads the clock to check certificate validity",
	"crypto.x509.parse_and_verify_certificates":              "reads the clock to check certificate validity",
}

// Capabilities are OPA's capabilities for this version minus the forbidden
// built-ins, so that the compiler itself rejects any call to one of them.
func Capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		_, bad := forbiddenBuiltins[b.Name]
		return bad
	})
	return caps
}

// checkForbidden names every call of a forbidden built-in with its file and
// line. The compiler would refuse them anyway ("undefined function"), but
// this message says that the built-in exists and why plexus refuses it.
func checkForbidden(modules map[string]*ast.Module) error {
	var found []string
	for _, m := range modules {
		ast.WalkRefs(m, func(r ast.Ref) bool {
			name, _ := ast.BuiltinNameFromRef(r) // "" for refs into data or input
			if why, bad := forbiddenBuiltins[name]; bad {
				found = append(found, fmt.Sprintf("%s: built-in %s is forbidden in plexus policies: it %s", r[0].Location, name, why))
			}
			return false
		})
	}
	if len(found) == 0 {
		return nil
	}
	slices.Sort(found)
	return fmt.Errorf("%s", strings.Join(found, "\n"))
}
