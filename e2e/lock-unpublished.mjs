// Adds to package-lock.json an entry for each optional dependency that was
// never published, so that `npm ci` accepts the lock:
//
//	node e2e/lock-unpublished.mjs   # after every `npm install` in e2e/
//
// @qwen-code/qwen-code 0.24.4 and its @teddyzhu/clipboard 0.0.5 name five
// platform packages of @teddyzhu/clipboard (darwin-arm64, darwin-x64,
// linux-arm64-gnu, win32-arm64-msvc, win32-x64-msvc) as optional
// dependencies, and the registry has none of them. `npm install` leaves
// them out of the lock, but `npm ci` still looks each one up, gets a 404,
// and puts a placeholder without a version in its tree, under the package
// that depends on it; it then refuses a lock that lacks the placeholder
// ("Missing: @teddyzhu/clipboard-darwin-arm64@ from lock file"). The
// entries added here are those placeholders; npm ci skips them.
import fs from 'node:fs';

const file = new URL('./package-lock.json', import.meta.url);
const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
const pkgs = lock.packages;

// resolves reports whether the package at loc finds name the way Node.js
// does: in its own node_modules or in that of a directory above it.
function resolves(loc, name) {
  for (let dir = loc; ; ) {
    if (pkgs[(dir ? dir + '/' : '') + 'node_modules/' + name]) {
      return true;
    }
    if (!dir) {
      return false;
    }
    const i = dir.lastIndexOf('/node_modules/');
    dir = i < 0 ? '' : dir.slice(0, i);
  }
}

let added = 0;
for (const [loc, pkg] of Object.entries(pkgs)) {
  for (const name of Object.keys(pkg.optionalDependencies ?? {})) {
    if (!resolves(loc, name)) {
      pkgs[(loc ? loc + '/' : '') + 'node_modules/' + name] = { version: '', optional: true };
      console.log(`${loc || '(root)'}: ${name} (unpublished)`);
      added++;
    }
  }
}
if (added > 0) {
  fs.writeFileSync(file, JSON.stringify(lock, null, 2) + '\n');
}
console.log(`${added} entries added to package-lock.json`);
