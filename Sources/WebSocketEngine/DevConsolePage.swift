/// --devconsole's page: one self-contained HTML file (no external script, font or style)
/// that opens a WebSocket to the URL it was loaded from (ws:, or wss: over https:), sends
/// each line typed as a text message and lists what comes back with its type, and the
/// Close code and reason. Tests drive it through `window.wspipeConsole`.
enum DevConsolePage {
    static let html = #"""
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wspipe console</title>
<style>
body { font: 14px/1.4 monospace; margin: 0; display: flex; flex-direction: column; height: 100vh; }
header, form { display: flex; gap: .5em; padding: .5em; background: #eee; align-items: center; }
#url { flex: 1; font: inherit; }
#line { flex: 1; font: inherit; }
#log { flex: 1; overflow-y: auto; margin: 0; padding: .5em; white-space: pre-wrap; word-break: break-all; }
.in { color: #064; } .out { color: #036; } .info { color: #666; } .error { color: #a00; }
</style>
</head>
<body>
<header><input id="url" aria-label="WebSocket URL"><button id="toggle">Connect</button><span id="state">closed</span></header>
<pre id="log"></pre>
<form id="send"><input id="line" aria-label="message" placeholder="a line to send as a text message" autocomplete="off">
<button>Send</button></form>
<script>
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  $("url").value = scheme + location.host + location.pathname + location.search;
  let socket = null;
  const events = [];
  function log(kind, text) {
    events.push({ kind: kind, text: text });
    const line = document.createElement("div");
    line.className = kind;
    line.textContent = new Date().toISOString().slice(11, 23) + " " + text;
    $("log").appendChild(line);
    $("log").scrollTop = $("log").scrollHeight;
  }
  function state(text) { $("state").textContent = text; $("toggle").textContent = socket ? "Close" : "Connect"; }
  function hex(bytes) { return Array.from(bytes.slice(0, 64), (b) => b.toString(16).padStart(2, "0")).join(" "); }
  function connect() {
    socket = new WebSocket($("url").value);
    socket.binaryType = "arraybuffer";
    state("connecting");
    socket.onopen = () => { state("open"); log("info", "connected to " + socket.url + (socket.protocol ? " (" + socket.protocol + ")" : "")); };
    socket.onmessage = (event) => {
      if (typeof event.data === "string") { log("in", "< text: " + event.data); }
      else { const bytes = new Uint8Array(event.data); log("in", "< binary (" + bytes.length + " bytes): " + hex(bytes)); }
    };
    socket.onerror = () => log("error", "connection error");
    socket.onclose = (event) => {
      log("info", "closed: code " + event.code + (event.reason ? ", reason '" + event.reason + "'" : "") + (event.wasClean ? "" : " (not clean)"));
      socket = null;
      state("closed");
    };
  }
  $("toggle").onclick = () => { if (socket) { socket.close(1000); } else { connect(); } };
  $("send").onsubmit = (event) => {
    event.preventDefault();
    if (!socket || socket.readyState !== WebSocket.OPEN) { log("error", "not connected"); return; }
    socket.send($("line").value);
    log("out", "> text: " + $("line").value);
    $("line").value = "";
  };
  window.wspipeConsole = { events: events, connect: connect,
    send: (text) => { $("line").value = text; $("send").requestSubmit(); },
    close: (code, reason) => socket && socket.close(code, reason) };
  connect();
})();
</script>
</body>
</html>
"""#
}
