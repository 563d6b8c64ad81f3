package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/plexus-cni/plexus/tests/harness"
)

// crio is CRI-O (CRIO), with Debian's conmon and runc.
type crio struct{}

func (crio) Name() Runtime { return CRIO }

func (crio) bins() []string { return []string{"crio", "pinns", "crio-copyimg"} }

func (crio) hostBins() []string { return []string{"conmon", "runc"} }

// crioConfig is CRI-O's whole configuration: its storage (root, runroot),
// its run-time state, the namespaces pinns pins, runc's state, the CNI
// directories and the pause image are all under the node's directory or
// the node's, as with containerd (containerdConfig). The sections and keys
// are crio.conf(5)'s.
const crioConfig = `[crio]
root = %[1]q
runroot = %[2]q
storage_driver = %[3]q
log_dir = %[4]q
version_file = %[5]q
version_file_persist = %[6]q
clean_shutdown_file = %[7]q

[crio.api]
listen = %[8]q
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
# Namespaces pinned by pinns go to namespaces_dir/netns (the path CNI
# plugins get as CNI_NETNS), not /var/run/netns.
namespaces_dir = %[9]q
pinns_path = %[10]q
container_exits_dir = %[11]q
container_attach_socket_dir = %[12]q
hooks_dir = [%[13]q]
# No mounts from the host's /usr/share/containers/mounts.conf, no CDI
# specs from the host's /etc/cdi.
default_mounts_file = %[14]q
cdi_spec_dirs = [%[15]q]

[crio.runtime.runtimes.runc]
runtime_path = %[16]q
runtime_type = "oci"
runtime_root = %[17]q
monitor_path = %[18]q
monitor_cgroup = "pod"

[crio.image]
pause_image = %[19]q
pause_command = "/pause"
# Never pulled (imported by copyimg): the policy only has to exist.
signature_policy = %[20]q
pinned_images = [%[19]q]

[crio.network]
network_dir = %[21]q
plugin_dirs = [%[22]q]

[crio.nri]
enable_nri = false

[crio.metrics]
enable_metrics = false
`

// crioPolicy is the containers-policy.json(5) CRI-O and copyimg read:
// images come only from the tests' own archives.
const crioPolicy = `{"default": [{"type": "insecureAcceptAnything"}]}`

// crioStorageDriver is containers/storage's name for the snapshotter the
// node uses: overlay when the kernel mounts one on the node's filesystem,
// else vfs (plain copies).
func (n *Node) crioStorageDriver() (string, error) {
	snap, err := snapshotter(n.Dir)
	if err != nil {
		return "", err
	}
	if snap == "overlayfs" {
		return "overlay", nil
	}
	return "vfs", nil
}

func (n *Node) crioDir(elem ...string) string {
	return filepath.Join(append([]string{n.Dir, "crio"}, elem...)...)
}

func (crio) writeConfig(n *Node) error {
	driver, err := n.crioStorageDriver()
	if err != nil {
		return err
	}
	// Debian's runc, through vmrunc: what containerdConfig's
	// restrict_oom_score_adj and containerd's tolerance of a missing
	// hugetlb cgroup do, CRI-O has no setting for.
	runc := filepath.Join(harness.BinDir, "vmrunc")
	conmon, err := lookPath("conmon")
	if err != nil {
		return err
	}
	for _, d := range []string{n.crioDir("hooks.d"), n.crioDir("conf.d"), n.crioDir("run"), filepath.Join(n.Dir, "cdi")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(n.crioDir("policy.json"), []byte(crioPolicy), 0o644); err != nil {
		return err
	}
	// containers-storage.conf(5), the same store as crio.conf's, for
	// copyimg; registries.conf(5) without registries: nothing is pulled.
	storage := fmt.Sprintf("[storage]\ndriver = %q\ngraphroot = %q\nrunroot = %q\n",
		driver, n.crioDir("storage"), n.crioDir("run", "storage"))
	for file, data := range map[string]string{"mounts.conf": "", "storage.conf": storage, "registries.conf": ""} {
		if err := os.WriteFile(n.crioDir(file), []byte(data), 0o644); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(crioConfig,
		n.crioDir("storage"), n.crioDir("run", "storage"), driver, n.crioDir("pods"),
		n.crioDir("run", "version"), n.crioDir("version"), n.crioDir("clean.shutdown"),
		n.Socket,
		n.crioDir("run"), filepath.Join(n.binDir, "pinns"), n.crioDir("run", "exits"),
		n.crioDir("run", "attach"), n.crioDir("hooks.d"), n.crioDir("mounts.conf"),
		filepath.Join(n.Dir, "cdi"),
		runc, filepath.Join(n.Dir, "runc"), conmon,
		PauseImage, n.crioDir("policy.json"),
		n.ConfDir, n.cniBinDir)
	return os.WriteFile(n.crioDir("crio.conf"), []byte(conf), 0o644)
}

// command is CRI-O with its config and, in place of the host's
// /etc/crio/crio.conf.d, an empty drop-in directory.
func (crio) command(n *Node, debug bool) (string, []string, []string, error) {
	args := []string{"--config", n.crioDir("crio.conf"), "--config-dir", n.crioDir("conf.d")}
	if debug {
		args = append(args, "--log-level", "debug")
	}
	return filepath.Join(n.binDir, "crio"), args, n.crioEnv(), nil
}

// crioEnv points containers/image and containers/storage at the node's
// files rather than the host's /etc/containers.
func (n *Node) crioEnv() []string {
	return []string{
		"CONTAINERS_REGISTRIES_CONF=" + n.crioDir("registries.conf"),
		"CONTAINERS_STORAGE_CONF=" + n.crioDir("storage.conf"),
		"CONTAINERS_POLICY_JSON=" + n.crioDir("policy.json"),
	}
}

// importImage copies an image archive (an OCI layout in a tar, as
// tools/image writes, with one image) into CRI-O's containers/storage
// under name, else the archive's own, with CRI-O's own copyimg (`make
// runtimes`): what `podman load` would do on a node. The store takes its
// locks, so CRI-O may be running.
func (crio) importImage(n *Node, archive, name string) error {
	if name == "" {
		var err error
		if name, err = imageName(archive); err != nil {
			return err
		}
	}
	driver, err := n.crioStorageDriver()
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(n.binDir, "crio-copyimg"),
		"--root", n.crioDir("storage"), "--runroot", n.crioDir("run", "storage"),
		"--storage-driver", driver, "--signature-policy", n.crioDir("policy.json"),
		"--image-name", name, "--import-from", "oci-archive:"+archive)
	cmd.Env = append(os.Environ(), n.crioEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("crio-copyimg %s: %w: %s", archive, err, out)
	}
	return nil
}

// imageName is the name an image archive of tools/image gives its one
// image (index.json's org.opencontainers.image.ref.name).
func imageName(archive string) (string, error) {
	out, err := exec.Command("tar", "-xOf", archive, "index.json").Output()
	if err != nil {
		return "", fmt.Errorf("read index.json of %s: %w", archive, err)
	}
	var index struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(out, &index); err != nil || len(index.Manifests) != 1 {
		return "", fmt.Errorf("index.json of %s: want one image (%v): %s", archive, err, out)
	}
	name := index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	if name == "" {
		return "", fmt.Errorf("index.json of %s: the image has no org.opencontainers.image.ref.name", archive)
	}
	return name, nil
}

// crioNetwork is what CRI-O's CNI code (ocicni) loaded in its latest
// reload of the conf dir, from its log: every reload logs "Found CNI
// network NAME (type=TYPE) at FILE" for each config and then "Updated
// default CNI network name to NAME". CRI-O's CRI Status carries no CNI
// config (containerd's does: containerd.loadedNetwork).
type crioNetwork struct {
	name  string
	files map[string]string // network name -> config file
}

// crioReloads reads CRI-O's log from offset and returns its latest
// complete reload (nil when none) and the log's size.
func (n *Node) crioReloads(offset int64) (*crioNetwork, int64, error) {
	f, err := os.Open(n.containerd.LogPath)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return nil, 0, err
	}
	var last *crioNetwork
	cur := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		msg := logMsg(sc.Text())
		if rest, ok := strings.CutPrefix(msg, "Found CNI network "); ok {
			name, _, _ := strings.Cut(rest, " ")
			if _, file, ok := strings.Cut(rest, ") at "); ok {
				if _, seen := cur[name]; !seen {
					cur[name] = file
				}
			}
			continue
		}
		if rest, ok := strings.CutPrefix(msg, "Updated default CNI network name to "); ok {
			last = &crioNetwork{name: rest, files: cur}
			cur = map[string]string{}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	end, err := f.Seek(0, 1)
	return last, end, err
}

// logMsg is the msg value of a logfmt line as CRI-O's logger writes it
// (quoted when it must be; more fields may follow, as at log level debug),
// or "" without one.
func logMsg(line string) string {
	_, rest, ok := strings.Cut(line, " msg=")
	if !ok {
		return ""
	}
	if !strings.HasPrefix(rest, `"`) {
		v, _, _ := strings.Cut(rest, " ")
		return v
	}
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return ""
	}
	v, _ := strconv.Unquote(quoted)
	return v
}

// loadedNetwork is the default network of CRI-O's latest reload and the
// bytes of the file it came from.
func (crio) loadedNetwork(_ context.Context, n *Node) (string, []byte, error) {
	nw, _, err := n.crioReloads(0)
	if err != nil || nw == nil || nw.name == "" {
		return "", nil, err
	}
	data, err := os.ReadFile(nw.files[nw.name])
	if err != nil {
		return "", nil, fmt.Errorf("CRI-O's network %s: %w", nw.name, err)
	}
	return nw.name, data, nil
}

// uses reads CRI-O's reloads after the log's current end (taken before
// the write), since its CRI status names no network.
func (crio) uses(n *Node, file string, _ []byte, network string) (cniUse, error) {
	_, offset, err := n.crioReloads(0)
	if err != nil {
		return nil, fmt.Errorf("CRI-O's log: %w", err)
	}
	return func(context.Context) (bool, string) {
		nw, _, err := n.crioReloads(offset)
		if err != nil || nw == nil {
			return false, ""
		}
		ok := nw.name == network && nw.files[network] == filepath.Join(n.ConfDir, file)
		return ok, fmt.Sprintf("it uses %q from %v", nw.name, nw.files)
	}, nil
}

// netnsDir is namespaces_dir's netns, where pinns pins them.
func (crio) netnsDir(n *Node) string { return n.crioDir("run", "netns") }

// cniSetupLines: CRI-O logs "Adding pod NS_NAME to CNI network" before the
// ADD and "Checking pod NS_NAME for CNI network" before the CHECK it runs
// right after (it brings loopback up itself, without a plugin).
func (crio) cniSetupLines(_, namespace, name string) (string, string, func(string) bool) {
	pod := namespace + "_" + name
	return `msg="Adding pod ` + pod + ` to CNI network `, `msg="Checking pod ` + pod + ` for CNI network `,
		func(string) bool { return true }
}

// monitorPIDs are the conmon processes of this node's containers: CRI-O
// starts one per container, outside its process group, with the
// container's directories under the node's on its command line.
func (crio) monitorPIDs(n *Node) []int {
	var out []int
	for _, p := range procCmdlines() {
		argv0, _, _ := strings.Cut(p.cmdline, "\x00")
		if filepath.Base(argv0) == "conmon" && strings.Contains(p.cmdline, "\x00"+n.Dir+"/") {
			out = append(out, p.pid)
		}
	}
	return out
}

// traits: CRI-O checks every ADD, sends one DEL per sandbox with the ADD's
// config, collects garbage at start and runs no infra container
// (drop_infra_ctr).
func (crio) traits() traits {
	return traits{
		delFromCache:  true,
		gcAtStart:     true,
		mapsHostPorts: true,
		skips: map[string]string{
			"CNIStatus": "CRI-O sends STATUS only until its CNI plugin first becomes ready after a start " +
				"(cnimgr's pollUntilReady): a plexusd outage later leaves the node Ready",
		},
	}
}
