//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// inspectorCLI is a fake node CLI: it holds a secret, makes a FIFO at $ACK,
// runs its argument through /bin/bash -c, and writes "ack" to the FIFO on
// SIGUSR2 (a listener of that signal leaves SIGUSR1 to node).
const inspectorCLI = `globalThis.SECRET = 'Bearer tok-' + 'abc123XYZ';
const fs = require('fs'), { execFileSync, spawn } = require('child_process');
const fifo = process.env.ACK;
execFileSync('mkfifo', [fifo]);
process.on('SIGUSR2', () => fs.writeFileSync(fifo, 'ack\n'));
const c = spawn('/bin/bash', ['-c', process.argv[2]], { stdio: ['ignore', 'inherit', 'inherit']});
c.on('exit', (code) => { console.log('cli: command exit', code); process.exit(0); });
`

// inspectorAttack is run by the nested command once the CLI has had
// SIGUSR1: it looks for the inspector on 127.0.0.1:9229 for 2 seconds
// (node opens it on a thread of its own) and, found, evaluates code in
// the CLI through it.
const inspectorAttack = `const http = require('http'), net = require('net'), crypto = require('crypto');
const port = 9229, end = Date.now() + 2000;
function frame(s) { const p = Buffer.from(s), m = crypto.randomBytes(4);
  const h = Buffer.from([0x81, 0x80 | 126, p.length >> 8, p.length & 255]);
  for (let i = 0; i < p.length; i++) p[i] ^= m[i % 4]; return Buffer.concat([h, m, p]); }
function evaluate(list) {
  const u = new URL(JSON.parse(list)[0].webSocketDebuggerUrl);
  const s = net.connect(port, '127.0.0.1', () => s.write('GET ' + u.pathname + ' HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: ' + crypto.randomBytes(16).toString('base64') + '\r\nSec-WebSocket-Version: 13\r\n\r\n'));
  let buf = '', up = false;
  s.on('data', (x) => { buf += x.toString('latin1');
    if (!up) { const i = buf.indexOf('\r\n\r\n'); if (i < 0) return; up = true; buf = buf.slice(i + 4);
      s.write(frame(JSON.stringify({ id: 1, method: 'Runtime.evaluate', params: { expression: 'globalThis.SECRET' } }))); }
    if (buf.includes('"id":1')) { console.log('attack: evaluated', buf.slice(buf.indexOf('{'))); s.destroy(); } });
}
(function look() {
  http.get({ host: '127.0.0.1', port, path: '/json/list' }, (r) => { let d = ''; r.on('data', (x) => d += x); r.on('end', () => evaluate(d)); })
    .on('error', (e) => { if (Date.now() < end) setTimeout(look, 20); else console.log('attack: inspector closed:', e.code); });
})();
`

// TestSandboxNodeInspector: a command the fake node CLI runs (in the
// domain nested in the CLI's) signals the CLI with SIGUSR1 and looks for
// node's inspector. With NodeOptions in the CLI's NODE_OPTIONS the
// inspector stays closed, on root's route and by the first stage; without
// (the control), the command evaluates code in the CLI and reads its
// secret.
func TestSandboxNodeInspector(t *testing.T) {
	defer goleak.VerifyNone(t)
	requireLandlock(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node, which the test's fake CLI is: %v", err)
	}
	r := newRig(t)
	p := r.policy(WorkspaceWrite)
	p.Private = true
	cli, attack := filepath.Join(r.work, "cli.js"), filepath.Join(r.work, "attack.js")
	for f, s := range map[string]string{cli: inspectorCLI, attack: inspectorAttack} {
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `kill -USR1 $PPID; kill -USR2 $PPID; read a < "$ACK"; ` + node + ` ` + attack
	fakeCLI := func(name, opts string) *exec.Cmd {
		cmd := exec.Command("timeout", "60", node, cli, script)
		cmd.Dir = r.work
		cmd.Env = append(os.Environ(), "ACK="+filepath.Join(r.temp, name+".ack"))
		if opts != "" {
			cmd.Env = append(cmd.Env, "NODE_OPTIONS="+opts)
		}
		return cmd
	}
	held := func(t *testing.T, out string) {
		t.Helper()
		if !strings.Contains(out, "attack: inspector closed: ECONNREFUSED") || strings.Contains(out, "tok-abc123XYZ") ||
			!strings.Contains(out, "cli: command exit 0") {
			t.Errorf("the command reached the CLI's inspector, or did not run:\n%s", out)
		}
	}
	t.Run("control", func(t *testing.T) {
		_, out := onRootsRoute(t, p, fakeCLI("control", ""))
		if !strings.Contains(out, "tok-abc123XYZ") {
			t.Errorf("without the option, want the command to read the CLI's secret through the inspector:\n%s", out)
		}
	})
	t.Run("root", func(t *testing.T) {
		_, out := onRootsRoute(t, p, fakeCLI("root", NodeOptions("")))
		held(t, out)
	})
	t.Run("stage", func(t *testing.T) {
		requireStage(t)
		serr, werr, out := stageRun(t, p, fakeCLI("stage", NodeOptions("--max-old-space-size=512")), nil)
		if serr != nil || werr != nil {
			t.Fatalf("sandboxed CLI by the first stage: Started() = %v, Wait() = %v: %s", serr, werr, out)
		}
		held(t, out)
	})
}
