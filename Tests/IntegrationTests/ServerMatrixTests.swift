import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The server side of issue 34's combination matrix: every server mode of `wspipe -l`
/// against clients at their defaults (MatrixDimensions.server; Python `websockets`, Node
/// `ws`, websocat, headless Chromium), the cases chosen pairwise. Each case starts its own
/// server, probes that the access rule refuses a client without its credential, origin or
/// path, then has the client send three text messages (one 70,000 bytes) and get them back:
/// echoed (--echo, --exec and --dir running sed as a cat, --static beside --echo), relayed by the test
/// from the server's stdout to its stdin (stdio, --broadcast), or as bytes from a TCP echo
/// behind --forward. Checked: what came back, the extension agreed, the close code on both
/// sides, the static file, the server's end at SIGTERM, and each limit's own mark: the rate
/// paused the connection (metrics), a flood got 1008, a second connection from the address
/// and a burst of handshakes got 429, the server names the address the PROXY line or the
/// Forwarded header claims.
/// WSPIPE_MATRIX_CASES=3,17 runs only those cases.
final class ServerMatrixTests: IntegrationTestCase {
    func testTheServerMatrix() throws {
        try MatrixTools.require([.socat, .chromium])
        let run = MatrixRun(directory: temporaryDirectory)
        defer { run.finish() }
        let matrix = MatrixDimensions.server
        var cases = matrix.generate().cases
        if let only = ProcessInfo.processInfo.environment["WSPIPE_MATRIX_CASES"] {
            let numbers = Set(only.split(separator: ",").compactMap { Int($0) })
            cases = cases.filter { numbers.contains($0.number) }
        }
        let started = monotonicSeconds()
        let context = try ServerMatrixContext(run: run, directory: temporaryDirectory)
        run.forEach(cases.map(ServerMatrixCase.init), workers: 3, name: { $0.description }) { item in
            try item.run(context, in: run)
        }
        print("matrix: server \(cases.count) cases covering \(matrix.requiredPairs.count) pairs "
              + "(\(matrix.exclusions.count) pairs excluded), \(run.failureCount) failed, "
              + String(format: "%.1f s", monotonicSeconds() - started))
    }
}

/// What the server cases share: the messages, a --dir with its program, a --static directory,
/// the TCP echo behind --forward, and the page Chromium's cases run in.
struct ServerMatrixContext: Sendable {
    let tls: TLSMaterial
    let messages: [String]
    let messagesFile: String
    let programs: String
    let files: String
    let echoPort: Int
    let pageURL: String
    var pageOrigin: String { String(pageURL.dropLast("/index.html".count)) }
    static let probe = #"window.matrixProbe = "static ok";"#
    /// The --exec and --dir program: cat, without empty lines. websocat sends each line with
    /// its newline, which makes an empty line after it; the message websocat would get for it
    /// back, empty, it takes for the end of the stream. (The messages hold no empty line.)
    static let lines = ["/bin/sed", "-u", "/^$/d"]

    init(run: MatrixRun, directory: String) throws {
        tls = try TLSMaterial.shared()
        messages = ["hello matrix", MatrixPayload.text(70_000, seed: 7), "ünïcødé ✓ ∑"]
        messagesFile = directory + "/messages.json"
        try JSONSerialization.data(withJSONObject: messages).write(to: URL(fileURLWithPath: messagesFile))
        programs = directory + "/programs"
        files = directory + "/files"
        let page = directory + "/page"
        for folder in [programs, files, page] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        try "#!/bin/sh\nexec \(Self.lines.joined(separator: " "))\n".write(toFile: programs + "/lines", atomically: true, encoding: .utf8)
        chmod(programs + "/lines", 0o755)
        try Self.probe.write(toFile: files + "/probe.js", atomically: true, encoding: .utf8)
        try "<!DOCTYPE html><title>matrix</title>".write(toFile: page + "/index.html", atomically: true, encoding: .utf8)
        echoPort = try matrixFreePort()
        _ = try run.spawn(try Tool.socat.path(), ["TCP-LISTEN:\(echoPort),bind=127.0.0.1,fork,reuseaddr", "PIPE"])
        let pagePort = try matrixFreePort()
        _ = try run.spawn(Locations.python, ["-m", "http.server", "--bind", "127.0.0.1", "--directory", page, String(pagePort)])
        guard waitForLoopbackListener(port: echoPort), waitForLoopbackListener(port: pagePort) else {
            throw HarnessError("socat's TCP echo or the page server did not listen")
        }
        pageURL = "http://127.0.0.1:\(pagePort)/index.html"
    }
}

struct ServerMatrixCase: CustomStringConvertible, Sendable {
    let values: PairwiseCase
    let mode, client, transport, deflate, access, limits: String

    init(_ values: PairwiseCase) {
        self.values = values
        mode = values["mode"]
        client = values["client"]
        transport = values["transport"]
        deflate = values["deflate"]
        access = values["access"]
        limits = values["limits"]
    }

    var description: String { values.description }
    var token: String { "matrix-token-\(values.number)" }
    static let origin = "http://matrix.example"
    /// --dir runs the program its path names.
    var path: String { mode == "dir" ? "/lines" : "/matrix" }
    var secure: Bool { transport == "wss" }
    /// --forward's target echoes bytes: they come back in binary messages of its own sizes.
    var bytes: Bool { mode == "forward" }
    /// The test carries the client's messages from the server's stdout to its stdin.
    var relayed: Bool { mode == "stdio" || mode == "broadcast" }
    /// The address a PROXY line or a Forwarded header claims for the client.
    var claimedAddress: String { "203.0.113.\(values.number % 250 + 1):4711" }
    /// A client's headers: the Forwarded claim (only --trust-proxy's peers are believed).
    var headers: [String] { limits == "forwarded" ? ["Forwarded: for=\"\(claimedAddress)\""] : [] }

    func serverArguments(_ context: ServerMatrixContext) -> [String] {
        var arguments = ["-l", "127.0.0.1:0", "-v"]
        if secure { arguments += ["--cert", context.tls.serverCert, "--key", context.tls.serverKey] }
        if deflate == "server-refuses" { arguments += ["--no-deflate"] }
        switch access {
        case "require-bearer": arguments += ["--require-bearer"]
        case "allow-origin": arguments += ["--allow-origin", Self.origin] + (client == "chromium" ? ["--allow-origin", context.pageOrigin] : [])
        case "path": arguments += ["--path", path]
        default: break
        }
        // --forward refuses any request with an Origin its --allow-origin does not name (man page).
        if mode == "forward" && client == "chromium" && access != "allow-origin" { arguments += ["--allow-origin", context.pageOrigin] }
        switch limits {
        // 3 messages, one of 70,000 bytes: over both rates, so reading pauses at least once.
        case "rate-limit": arguments += ["--rate-limit", "4/s:1", "--byte-rate", "256K/s:16K", "--metrics", "/metrics"]
        // The messages stay within the rate; a flood after them is closed with 1008.
        case "rate-close": arguments += ["--rate-limit", "20/s:10", "--byte-rate", "1M/s:1M", "--rate-limit-action", "close"]
        // At most 5 requests before the end's burst (the access probe, two of the crowd, the
        // static file, the client), which then runs out of the 6.
        case "per-ip": arguments += ["--max-clients-per-ip", "1", "--max-handshakes-per-ip", "2/s:6"]
        case "proxy-protocol": arguments += ["--proxy-protocol", "--trust-proxy", "127.0.0.1/32"]
        case "forwarded": arguments += ["--trust-proxy", "127.0.0.1/32", "--client-address-header", "Forwarded"]
        default: break
        }
        switch mode {
        case "echo": arguments += ["--echo"]
        case "broadcast": arguments += ["--broadcast"]
        case "exec": arguments += ["--exec"] + ServerMatrixContext.lines
        case "dir": arguments += ["--dir", context.programs]
        case "forward": arguments += ["--forward", "tcp:127.0.0.1:\(context.echoPort)"]
        case "static": arguments += ["--echo", "--static", context.files]
        default: break
        }
        return arguments
    }

    func run(_ context: ServerMatrixContext, in matrix: MatrixRun) throws {
        let arguments = serverArguments(context)
        let environment = access == "require-bearer" ? ["WSPIPE_BEARER": token] : [:]
        let command = (environment.isEmpty ? "" : "WSPIPE_BEARER=\(token) ") + "wspipe " + arguments.joined(separator: " ")
        func fail(_ text: String) { matrix.fail("\(self): \(text)\n    \(command)   # client: \(client)") }

        let server = try matrix.spawn(Locations.wspipe, arguments, environment: environment, stdin: relayed ? .pipe : .null)
        let scheme = secure ? "wss" : "ws"
        guard let line = server.stderr.waitForLine(startingWith: "wspipe: listening on \(scheme)://127.0.0.1:", timeout: 20),
              let serverPort = Int(line.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            return fail("the server did not start: \(server.wait(timeout: 1))")
        }
        // Under --proxy-protocol, every client (probes too) goes through the relay.
        let port = limits == "proxy-protocol" ? try startProxyHeaderRelay(to: serverPort, in: matrix) : serverPort
        let url = "\(scheme)://127.0.0.1:\(port)\(path)"
        let staticURL = "\(secure ? "https" : "http")://127.0.0.1:\(port)/probe.js"
        try probeRefusal(url: url, port: port, context, in: matrix, fail: fail)
        // The server's record of a client's Close (websocat sends one without a code).
        let closed = client == "websocat" ? "disconnected (closed)" : "disconnected (closed) with 1000"
        var closes = 1
        // The stdio mode takes one client at a time: a second waits in the listen backlog,
        // unread, where no limit sees it (man page, The stdio mode).
        if limits == "per-ip" && mode != "stdio" {
            try probeCrowd(url: url, context, in: matrix, fail: fail)
            // The first connection's end must be counted before the client comes.
            _ = server.stderr.wait(timeout: 10) { String(decoding: $0, as: UTF8.self).components(separatedBy: "disconnected (closed) with 1000").count > 1 }
            closes += 1
        }

        let child = try startClient(url: url, staticURL: staticURL, context, in: matrix)
        if relayed {
            // websocat sends each line with its newline: here a line and an empty one, which
            // the test does not send back (websocat takes an empty message for the end).
            let lines = Array(context.messages.map { client == "websocat" ? $0 + "\n\n" : $0 + "\n" }.joined().utf8)
            if server.stdout.wait(timeout: 30, until: { $0 == lines }) {
                server.writeStdin(context.messages.map { $0 + "\n" }.joined())
            } else {
                fail("the server's stdout is not the client's messages: \(server.stdout.bytes.count) bytes, expected \(lines.count)")
            }
        }
        if client == "websocat" {
            // Until everything came back (more or less whitespace: see checkClient).
            let count = context.messages.joined().utf8.filter { $0 != 0x20 }.count
            _ = child.stdout.wait(timeout: 30) { $0.filter { $0 != 0x20 && $0 != 0x0A }.count >= count }
            child.closeStdin()
        }
        let result = child.wait(timeout: client == "chromium" ? 90 : 40)
        checkClient(result, context, fail: fail)

        if !server.stderr.wait(timeout: 10, until: { String(decoding: $0, as: UTF8.self).components(separatedBy: closed).count > closes }) {
            fail("the server did not log \(String(reflecting: closed)) \(closes) time(s):\n\(server.stderr.text)")
        }
        try checkLimits(server: server, url: url, metricsURL: "\(secure ? "https" : "http")://127.0.0.1:\(port)/metrics", context, in: matrix, fail: fail)
        server.signal(SIGTERM)
        // It closes its clients, then dies of the signal (as every mode does: a shell loop stops).
        let ended = server.wait(timeout: 15)
        if ended.termination != .signaled(SIGTERM) {
            fail("the server's end at SIGTERM: \(ended.termination), expected death by SIGTERM; stderr:\n\(ended.stderr)")
        }
    }

    /// The access rule refuses a client that lacks what it asks for (Python `websockets`).
    private func probeRefusal(url: String, port: Int, _ context: ServerMatrixContext, in matrix: MatrixRun,
                              fail: (String) -> Void) throws {
        let probe: (arguments: [String], status: Int)
        switch access {
        case "require-bearer": probe = ([url], 401)
        case "allow-origin": probe = ([url, "--origin", "http://elsewhere.example"], 403)
        case "path": probe = ([url.replacingOccurrences(of: path, with: "/elsewhere")], 404)
        default: return
        }
        let child = try matrix.spawn(Locations.python, ["\(Locations.peers)/matrix_client.py", "--probe"] + probe.arguments
                                     + ["--cafile", context.tls.caCert], environment: ["PYTHONDONTWRITEBYTECODE": "1"])
        let result = child.wait(timeout: 30)
        if result.stdoutText != "REFUSED \(probe.status)\n" {
            fail("a client without the \(access) credential: \(result), expected REFUSED \(probe.status)")
        }
    }

    /// --max-clients-per-ip 1: a second connection beside a first (both with what the access
    /// rule asks) gets 429.
    private func probeCrowd(url: String, _ context: ServerMatrixContext, in matrix: MatrixRun, fail: (String) -> Void) throws {
        let result = try probeAdmitted(url: url, ["--crowd"], context, in: matrix)
        if result.stdoutText != "REFUSED 429\n" {
            fail("a second connection from the address under --max-clients-per-ip 1: \(result), expected REFUSED 429")
        }
    }

    /// Handshakes with what the access rule asks, by matrix_client.py --probe.
    private func probeAdmitted(url: String, _ options: [String], _ context: ServerMatrixContext, in matrix: MatrixRun) throws -> RunResult {
        var arguments = ["\(Locations.peers)/matrix_client.py", "--probe"] + options + [url, "--cafile", context.tls.caCert]
        if access == "require-bearer" { arguments += ["--bearer", token] }
        if access == "allow-origin" { arguments += ["--origin", Self.origin] }
        return try matrix.spawn(Locations.python, arguments, environment: ["PYTHONDONTWRITEBYTECODE": "1"]).wait(timeout: 30)
    }

    /// A relay that prepends a PROXY v1 line claiming `claimedAddress`; its port.
    private func startProxyHeaderRelay(to port: Int, in matrix: MatrixRun) throws -> Int {
        let relay = try matrix.spawn(Locations.python, ["\(Locations.peers)/proxy_header.py", String(port), "--client", claimedAddress],
                                     environment: ["PYTHONDONTWRITEBYTECODE": "1"])
        guard let line = relay.stdout.waitForLine(startingWith: "PORT ", timeout: 20), let relayPort = Int(line.dropFirst(5)) else {
            throw HarnessError("the PROXY header relay did not start: \(relay.stderr.text)")
        }
        return relayPort
    }

    /// Each limit's mark on the server: the rate paused the connection, or the server names
    /// the client by the address the PROXY line or the Forwarded header claims.
    private func checkLimits(server: ChildProcess, url: String, metricsURL: String, _ context: ServerMatrixContext, in matrix: MatrixRun,
                             fail: (String) -> Void) throws {
        switch limits {
        case "rate-close":
            let result = try probeAdmitted(url: url, ["--flood", "40"], context, in: matrix)
            if result.stdoutText != "CLOSE 1008\n" {
                fail("40 messages at once under --rate-limit 20/s:10 --rate-limit-action close: \(result), expected CLOSE 1008")
            }
        case "per-ip":
            // --max-handshakes-per-ip 2/s:6: 20 handshakes at once run out of the burst (even
            // at 150 ms each, the rate refills only 6 meanwhile).
            let result = try probeAdmitted(url: url, ["--burst", "20"], context, in: matrix)
            if !result.stdoutText.hasPrefix("REFUSED 429 AFTER ") {
                fail("20 handshakes at once under --max-handshakes-per-ip 2/s:6: \(result), expected REFUSED 429 AFTER n")
            }
        case "rate-limit":
            var arguments = ["\(Locations.peers)/matrix_client.py", "--fetch", metricsURL, "--cafile", context.tls.caCert]
            if access == "require-bearer" { arguments += ["--bearer", token] }
            let result = try matrix.spawn(Locations.python, arguments, environment: ["PYTHONDONTWRITEBYTECODE": "1"]).wait(timeout: 30)
            let paused = result.stdoutText.split(separator: "\n").first { $0.hasPrefix(#"wspipe_limited_total{reason="rate_paused"} "#) }
            if (paused?.split(separator: " ").last).flatMap({ Int($0) }) ?? 0 < 1 {
                fail("no pause for the rate in the metrics (\(paused ?? "no rate_paused line")): \(result)")
            }
        case "proxy-protocol", "forwarded":
            let named = "connected from \(claimedAddress) to "
            if !server.stderr.text.contains(named) {
                fail("the server did not name the client \(claimedAddress) (\(String(reflecting: named))):\n\(server.stderr.text)")
            }
        default:
            break
        }
    }

    private func startClient(url: String, staticURL: String, _ context: ServerMatrixContext, in matrix: MatrixRun) throws -> ChildProcess {
        let origin = access == "allow-origin" ? Self.origin : nil
        let bearer = access == "require-bearer" ? token : nil
        switch client {
        case "python", "node":
            var arguments = [url, context.messagesFile, "--cafile", context.tls.caCert]
            if deflate == "not-offered" { arguments += ["--no-deflate"] }
            if let bearer { arguments += ["--bearer", bearer] }
            if let origin { arguments += ["--origin", origin] }
            if bytes { arguments += ["--bytes"] }
            if mode == "static" { arguments += ["--get", staticURL] }
            arguments += headers.flatMap { ["--header", $0] }
            return client == "python"
                ? try matrix.spawn(Locations.python, ["\(Locations.peers)/matrix_client.py"] + arguments, environment: ["PYTHONDONTWRITEBYTECODE": "1"])
                : try matrix.spawn(MatrixTools.node, ["\(Locations.peers)/matrix_client.js"] + arguments,
                                   environment: ["NODE_PATH": MatrixTools.nodeModules])
        case "websocat":
            // Each stdin line is a text message, its newline included; a message is printed
            // as it came, a newline added when it has none. -B: its buffer (64 KiB by default)
            // splits longer messages. It takes an empty message for the end: --exec cat gives
            // one back for the newline each message brings.
            var arguments = ["-t", "-B", "200000", "--websocket-ignore-zeromsg", url]
            if let bearer { arguments += ["-H", "Authorization: Bearer \(bearer)"] }
            if let origin { arguments += ["--origin", origin] }
            arguments += headers.flatMap { ["-H", $0] }
            if secure { arguments += ["-k"] }
            let child = try matrix.spawn(Locations.websocat, arguments, stdin: .pipe)
            child.writeStdin(context.messages.joined(separator: "\n") + "\n")
            return child
        default:
            return try matrix.spawn(Locations.python, ["\(Locations.peers)/browser.py", "--timeout", "60"] + (secure ? ["--insecure"] : [])
                                    + [context.pageURL, browserExpression(url: url, staticURL: staticURL, context)],
                                    environment: ["PYTHONDONTWRITEBYTECODE": "1"])
        }
    }

    /// A page's exchange: (the static script,) the messages, the close; a JSON summary.
    private func browserExpression(url: String, staticURL: String, _ context: ServerMatrixContext) -> String {
        let messages = String(decoding: (try? JSONSerialization.data(withJSONObject: context.messages)) ?? Data(), as: UTF8.self)
        return """
            (async () => {
              const out = {};
              if (\(mode == "static")) {
                await new Promise((ok, no) => { const s = document.createElement('script'); s.src = '\(staticURL)';
                  s.onload = ok; s.onerror = () => no(new Error('the static script did not load')); document.head.appendChild(s); });
                out.static = window.matrixProbe;
              }
              const messages = \(messages);
              const want = new TextEncoder().encode(messages.join(''));
              const ws = new WebSocket('\(url)');
              ws.binaryType = 'arraybuffer';
              await new Promise((ok, no) => { ws.onopen = ok; ws.onerror = () => no(new Error('no connection')); });
              out.ext = ws.extensions || 'none';
              for (const m of messages) ws.send(m);
              const got = [];
              const closed = new Promise((ok) => { ws.onclose = (e) => ok(e.code); });
              await new Promise((ok, no) => {
                ws.onmessage = (e) => {
                  got.push(typeof e.data === 'string' ? new TextEncoder().encode(e.data) : new Uint8Array(e.data));
                  const total = got.reduce((n, g) => n + g.length, 0);
                  if (\(bytes) ? total >= want.length : got.length === messages.length) ok();
                };
                setTimeout(() => no(new Error('timed out with ' + got.length + ' answers')), 30000);
              });
              const all = new Uint8Array(got.reduce((n, g) => n + g.length, 0));
              got.reduce((at, g) => { all.set(g, at); return at + g.length; }, 0);
              out.same = \(bytes) ? all.length === want.length && all.every((b, i) => b === want[i])
                : got.every((g, i) => new TextDecoder().decode(g) === messages[i]);
              ws.close(1000);
              out.close = await closed;
              return out;
            })()
            """
    }

    private func checkClient(_ result: RunResult, _ context: ServerMatrixContext, fail: (String) -> Void) {
        let agreed = deflate == "offered"
        switch client {
        case "websocat":
            // Lines come back as they went. --forward's bytes come in messages of the TCP
            // echo's sizes, which websocat prints with its newlines made spaces and one added
            // at each end: compare those without white space (the other clients compare bytes).
            let squeeze = { (text: String) in text.unicodeScalars.filter { $0 != " " && $0 != "\n" }.map(String.init).joined() }
            let got = bytes ? squeeze(result.stdoutText) : result.stdoutText
            let want = bytes ? squeeze(context.messages.joined()) : context.messages.joined(separator: "\n") + "\n"
            if got != want {
                let at = zip(got.utf8, want.utf8).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(got.utf8.count, want.utf8.count)
                fail("websocat printed \(got.utf8.count) bytes, expected \(want.utf8.count) (first difference at \(at)\(bytes ? ", white space aside" : "")): \(result)")
            }
            if result.exitCode != 0 { fail("websocat: \(result)") }
        case "chromium":
            let value = (try? JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any])?["value"] as? [String: Any]
            guard let value, result.exitCode == 0 else { return fail("the page's exchange failed: \(result)") }
            if value["same"] as? Bool != true { fail("the page got other messages back: \(value)") }
            if value["close"] as? Int != 1000 { fail("the page's close code: \(value)") }
            if (value["ext"] as? String ?? "").contains("permessage-deflate") != agreed { fail("extension agreed: \(value)") }
            if mode == "static" && value["static"] as? String != "static ok" { fail("the static script: \(value)") }
        default:
            var expected = ["GOT ok", "CLOSE 1000"]
            if mode == "static" { expected.insert("GET 200 \(ServerMatrixContext.probe)", at: 0) }
            let lines = result.stdoutText.split(separator: "\n").map(String.init)
            let ext = lines.first { $0.hasPrefix("EXT ") } ?? "no EXT line"
            if lines.filter({ !$0.hasPrefix("EXT ") }) != expected || result.exitCode != 0 {
                fail("\(client) client: \(result), expected \(expected)")
            }
            if ext.contains("permessage-deflate") != agreed { fail("extension agreed: \(ext), expected \(agreed ? "permessage-deflate" : "none")") }
        }
    }
}
