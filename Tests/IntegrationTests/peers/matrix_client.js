// The server matrix's Node `ws` client (ServerMatrixTests), at ws's defaults
// (perMessageDeflate offered) unless --no-deflate.
//   node matrix_client.js URL MESSAGES [--no-deflate] [--bearer T] [--origin O] [--cafile CA]
//                         [--bytes] [--get URL] [--header 'Name: value']...
// As matrix_client.py: sends the JSON list's messages at once, reads until they came back
// (--bytes: the same bytes however framed), closes with 1000; prints `EXT ...`, `GOT ok`
// and `CLOSE <code>`; --get first prints `GET <status> <body>`.
const WebSocket = require('ws');
const fs = require('fs');
const argv = process.argv.slice(2);
const flag = (name) => { const i = argv.indexOf(name); return i < 0 ? undefined : argv[i + 1]; };
const [url, file] = argv;
const messages = JSON.parse(fs.readFileSync(file, 'utf8'));
const ca = flag('--cafile') ? fs.readFileSync(flag('--cafile')) : undefined;
const headers = flag('--bearer') ? { Authorization: 'Bearer ' + flag('--bearer') } : {};
argv.forEach((a, i) => {
  if (a !== '--header') return;
  const [name, ...value] = argv[i + 1].split(':');
  headers[name.trim()] = value.join(':').trim();
});
setTimeout(() => { console.log('TIMEOUT'); process.exit(1); }, 25000);

function get(target) {
  return new Promise((ok) => {
    const lib = require(target.startsWith('https:') ? 'https' : 'http');
    lib.get(target, { headers, ca }, (answer) => {
      let body = '';
      answer.on('data', (d) => { body += d; });
      answer.on('end', () => { console.log(`GET ${answer.statusCode}${answer.statusCode === 200 ? ' ' + body.trim() : ''}`); ok(); });
    }).on('error', (e) => { console.log('GET error ' + e.message); ok(); });
  });
}

async function main() {
  if (flag('--get')) await get(flag('--get'));
  const c = new WebSocket(url, { perMessageDeflate: !argv.includes('--no-deflate'), headers, origin: flag('--origin'), ca });
  const want = Buffer.from(messages.join(''));
  const got = [];
  c.on('open', () => {
    console.log('EXT ' + (c.extensions || 'none'));
    for (const m of messages) c.send(m);
  });
  c.on('message', (data) => {
    got.push(Buffer.from(data));
    const all = Buffer.concat(got);
    const done = argv.includes('--bytes') ? all.length >= want.length : got.length === messages.length;
    if (!done) return;
    const same = argv.includes('--bytes') ? all.equals(want) : got.every((g, i) => g.equals(Buffer.from(messages[i])));
    console.log(same ? 'GOT ok' : `GOT different: ${got.length} answers, ${all.length} bytes`);
    c.close(1000);
  });
  c.on('unexpected-response', (req, res) => { console.log('REFUSED ' + res.statusCode); process.exit(1); });
  c.on('error', (e) => { console.log('ERROR ' + e.message); process.exit(1); });
  c.on('close', (code) => { console.log('CLOSE ' + code); process.exit(0); });
}
main();
