// Package inspector holds a node script that plays a command trying to
// run code inside its CLI through node's inspector, for the tests of the
// sandbox and the end-to-end tests.
package inspector

// Attack is a node script a command of a CLI runs: it sends SIGUSR1 to
// its nearest node ancestor (the CLI's node), looks for node's inspector
// on 127.0.0.1 at the port its first argument names (node's default,
// 9229, without one) for 3 seconds (node opens it on a thread of its own)
// and, found, evaluates code inside that node through it. It prints
// "attack: node ancestor PID", then "attack: evaluated in pid PID: SECRET"
// (SECRET the node's globalThis.SECRET), "attack: inspector closed
// CODE" (the error code of the last attempt) or, where the signal itself
// is refused, "attack: signal refused CODE". An inspector that another
// node opened (another process's test, say) is no answer: the attack
// prints "attack: another node's inspector, pid PID" without its secret
// and looks on, so that only the node it signalled can make it succeed
// (its code then ends "EOTHER" where that inspector stays open).
const Attack = `const fs = require('fs'), http = require('http'), net = require('net'), crypto = require('crypto');
let p = process.ppid;
while (p > 1 && !/node$/.test(fs.readFileSync('/proc/' + p + '/cmdline', 'utf8').split('\0')[0]))
  p = +/^PPid:\s+(\d+)/m.exec(fs.readFileSync('/proc/' + p + '/status', 'utf8'))[1];
console.log('attack: node ancestor ' + p);
try { process.kill(p, 'SIGUSR1'); } catch (e) { console.log('attack: signal refused ' + e.code); process.exit(0); }
const port = +(process.argv[2] || 9229), end = Date.now() + 3000;
let code = '', other = '';
function frame(s) { const b = Buffer.from(s), m = crypto.randomBytes(4);
  const h = Buffer.from([0x81, 0x80 | 126, b.length >> 8, b.length & 255]);
  for (let i = 0; i < b.length; i++) b[i] ^= m[i % 4]; return Buffer.concat([h, m, b]); }
function evaluate(list) {
  const u = new URL(JSON.parse(list)[0].webSocketDebuggerUrl);
  const s = net.connect(port, '127.0.0.1', () => s.write('GET ' + u.pathname + ' HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: ' + crypto.randomBytes(16).toString('base64') + '\r\nSec-WebSocket-Version: 13\r\n\r\n'));
  let buf = '', up = false;
  s.on('data', (x) => { buf += x.toString('latin1');
    if (!up) { const i = buf.indexOf('\r\n\r\n'); if (i < 0) return; up = true; buf = buf.slice(i + 4);
      s.write(frame(JSON.stringify({ id: 1, method: 'Runtime.evaluate', params: { expression: '"evaluated in pid " + process.pid + ": " + globalThis.SECRET' } }))); }
    const m = /evaluated in pid (\d+): [^"]*/.exec(buf); if (!m) return;
    s.destroy();
    if (+m[1] === p) return console.log('attack: ' + m[0]);
    if (other !== m[1]) console.log('attack: another node\'s inspector, pid ' + (other = m[1]));
    again('EOTHER'); });
  s.on('error', (e) => again(e.code));
}
function again(c) { code = c; if (Date.now() < end) setTimeout(look, 50); else console.log('attack: inspector closed ' + code); }
function look() {
  http.get({ host: '127.0.0.1', port, path: '/json/list' }, (r) => { let d = ''; r.on('data', (x) => d += x); r.on('end', () => evaluate(d)); })
    .on('error', (e) => again(e.code));
}
look();
`
