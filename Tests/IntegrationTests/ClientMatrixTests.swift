import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The client side of issue 34's combination matrix: wspipe against echo servers left at
/// their defaults (MatrixDimensions.client), the cases chosen pairwise. Each case checks
/// wspipe's output bytes, what the peer received (its byte count and the close code it
/// got, where the peer reports them), wspipe's exit status and its stderr. A restart case
/// stops the server (SIGTERM) after the first part of the input has come back, writes the
/// second part while it is down (the offline queue) and the third once it is up again: every
/// line must come back once, in order (nothing was in flight at the stop, so the man page's
/// RECONNECTION rules allow no loss). Peers are shared by the cases that use the same
/// server (restart cases have their own); cases run four at a time. A conversation case's
/// preamble (--send a marker, --expect its echo) must come back before stdin's lines on every
/// connection, so before the first part and again after a restart; an --until case ends the
/// run at its marker message, the last one stdin sends, with stdin still open, and stdout
/// holds that message alone (--print-match-only), over a restart too.
/// WSPIPE_MATRIX_CASES=3,17 runs only those cases (the numbers the failures name).
final class ClientMatrixTests: IntegrationTestCase {
    func testTheClientMatrix() throws {
        try MatrixTools.require([])
        let tls = try TLSMaterial.shared()
        let run = MatrixRun(directory: temporaryDirectory)
        defer { run.finish() }
        let matrix = MatrixDimensions.client
        var cases = matrix.generate().cases
        if let only = ProcessInfo.processInfo.environment["WSPIPE_MATRIX_CASES"] {
            let numbers = Set(only.split(separator: ",").compactMap { Int($0) })
            cases = cases.filter { numbers.contains($0.number) }
        }
        let proxyPort = try startProxy().port
        let peers = ClientMatrixPeers(run: run, tls: tls)
        let started = monotonicSeconds()
        // Start every shared server first (a few at once), then run the cases.
        let shared = Set(cases.map(ClientMatrixCase.init).filter { !$0.restarts }.map(\.peerKey))
        run.forEach(shared.sorted(), workers: 4, name: { $0.description }) { key in _ = try peers.shared(key) }
        run.forEach(cases.map(ClientMatrixCase.init), workers: 4, name: { $0.description }) { item in
            try item.run(peers: peers, proxyPort: proxyPort, tls: tls, in: run)
        }
        print("matrix: client \(cases.count) cases covering \(matrix.requiredPairs.count) pairs "
              + "(\(matrix.exclusions.count) pairs excluded), \(run.failureCount) failed, "
              + String(format: "%.1f s", monotonicSeconds() - started))
    }
}

/// Which echo server a case talks to: the program, how it listens, and (websocat, --exec)
/// whether it echoes text or binary.
struct MatrixPeerKey: Hashable, Comparable, CustomStringConvertible, Sendable {
    let peer: String
    let listen: String
    let flavor: String

    var description: String { "\(peer) on \(listen)\(flavor.isEmpty ? "" : " (\(flavor))")" }
    static func < (a: Self, b: Self) -> Bool { a.description < b.description }
}

/// An echo server of the client matrix that can be stopped and started again on the same
/// port or socket, and what it reported about each connection over its lives.
final class MatrixEchoPeer: @unchecked Sendable {
    let key: MatrixPeerKey
    private(set) var port: Int
    let socketPath: String?
    private let run: MatrixRun
    private let tls: TLSMaterial
    private var lives: [ChildProcess] = []

    init(_ key: MatrixPeerKey, run: MatrixRun, tls: TLSMaterial, name: String) throws {
        self.key = key
        self.run = run
        self.tls = tls
        socketPath = key.listen == "unix" ? matrixSocketPath(name) : nil
        if let socketPath { run.removeAtEnd(socketPath) }
        port = key.peer == "websocat" && key.listen != "unix" ? try matrixFreePort() : 0
        try launch()
    }

    var process: ChildProcess { lives[lives.count - 1] }

    /// Where the server says what it did: stdout for the Python and Node peers, stderr (-v) for wspipe.
    private func log(_ child: ChildProcess) -> OutputCollector {
        key.peer.hasPrefix("wspipe") ? child.stderr : child.stdout
    }

    private func launch() throws {
        if let socketPath { unlink(socketPath) }
        let listen = socketPath.map { "unix:" + $0 } ?? "127.0.0.1:\(port)"
        let secure = key.listen == "wss"
        let child: ChildProcess
        switch key.peer {
        case "python":
            child = try run.spawn(Locations.python, ["\(Locations.peers)/matrix_echo.py"]
                                  + (socketPath.map { ["--unix", $0] } ?? ["--port", String(port)])
                                  + (secure ? ["--tls", tls.serverCert, tls.serverKey] : []),
                                  environment: ["PYTHONDONTWRITEBYTECODE": "1"])
        case "node":
            child = try run.spawn(MatrixTools.node, ["\(Locations.peers)/matrix_echo.js", socketPath.map { "unix:" + $0 } ?? String(port)]
                                  + (secure ? [tls.serverCert, tls.serverKey] : []),
                                  environment: ["NODE_PATH": MatrixTools.nodeModules])
        case "websocat":
            let address = socketPath.map { "ws-u:unix-l:" + $0 } ?? "\(secure ? "wss" : "ws")-l:127.0.0.1:\(port)"
            child = try run.spawn(Locations.websocat, [key.flavor == "binary" ? "-b" : "-t"]
                                  + (secure ? ["--pkcs12-der", try MatrixTools.pkcs12(tls)] : []) + [address, "mirror:"])
        default:
            let mode = key.peer == "wspipe-echo" ? ["--echo"] : (key.flavor == "binary" ? ["-b"] : []) + ["--exec", "cat"]
            child = try run.spawn(Locations.wspipe, ["-l", listen, "-v"]
                                  + (secure ? ["--cert", tls.serverCert, "--key", tls.serverKey] : []) + mode)
        }
        lives.append(child)
        try waitUntilListening(child)
    }

    private func waitUntilListening(_ child: ChildProcess) throws {
        switch key.peer {
        case "python", "node":
            guard let line = child.stdout.waitForLine(startingWith: "PORT ", timeout: 20) else {
                throw HarnessError("\(key) did not start: \(child.stderr.text)")
            }
            if port == 0 && socketPath == nil { port = Int(line.dropFirst(5)) ?? 0 }
        case "websocat":
            let up = socketPath.map { path in
                let deadline = monotonicSeconds() + 15
                while monotonicSeconds() < deadline && !FileManager.default.fileExists(atPath: path) { usleep(10_000) }
                return FileManager.default.fileExists(atPath: path)
            } ?? waitForLoopbackListener(port: port)
            guard up else { throw HarnessError("\(key) did not start: \(child.stderr.text)") }
        default:
            guard let line = child.stderr.waitForLine(startingWith: "wspipe: listening on ", timeout: 20) else {
                throw HarnessError("\(key) did not start: \(child.stderr.text)")
            }
            if port == 0 && socketPath == nil, let bound = Int(line.split(separator: ":").last?.split(separator: "/").first ?? "") {
                port = bound
            }
        }
    }

    /// SIGTERM (the Python, Node and wspipe servers close with 1001; websocat just exits)
    /// or SIGKILL (no Close); `start` then gives it a new life on the same port or socket.
    func stop(_ signal: Int32) throws {
        process.signal(signal)
        guard process.wait(timeout: 10).termination != .timedOut else { throw HarnessError("\(key) did not stop on signal \(signal)") }
    }

    func start() throws { try launch() }

    /// What the peer reported about the connections to `path`, over all its lives: the
    /// close code it received ("none": no Close) and the payload bytes it received (nil
    /// when the peer does not count them). Waits up to `timeout` for the last life's report.
    func reports(path: String, timeout: Double = 5) -> [(code: String, bytes: Int?)]? {
        guard key.peer != "websocat" else { return nil }
        let last = log(process)
        _ = last.wait(timeout: timeout) { bytes in
            Self.parse(String(decoding: bytes, as: UTF8.self), path: path, wspipe: self.key.peer.hasPrefix("wspipe")).last != nil
        }
        return lives.flatMap { Self.parse(log($0).text, path: path, wspipe: key.peer.hasPrefix("wspipe")) }
    }

    private static func parse(_ text: String, path: String, wspipe: Bool) -> [(code: String, bytes: Int?)] {
        let lines = text.split(separator: "\n").map(String.init)
        guard wspipe else {
            return lines.filter { $0.hasPrefix("CLOSED \(path) ") }.map { line in
                let fields = Dictionary(line.split(separator: " ").dropFirst(2).map { field -> (String, String) in
                    let parts = field.split(separator: "=", maxSplits: 1)
                    return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
                }, uniquingKeysWith: { $1 })
                return (fields["code"] ?? "?", fields["bytes"].flatMap { Int($0) })
            }
        }
        // wspipe: * client 3 connected from 127.0.0.1:5000 to /case-7
        // wspipe: * client 3 disconnected (closed) with 1000 (normal closure)
        let clients = lines.compactMap { line -> String? in
            // "... to /case-7" or, over TLS, "... to /case-7 over TLSv1.3 ...".
            guard line.hasSuffix(" to \(path)") || line.contains(" to \(path) over "), let range = line.range(of: "client ") else { return nil }
            return line[range.upperBound...].split(separator: " ").first.map(String.init)
        }
        return clients.compactMap { client in
            guard let line = lines.first(where: { $0.contains("client \(client) disconnected") }) else { return nil }
            let code = line.range(of: " with ").map { String(line[$0.upperBound...].prefix { $0.isNumber }) } ?? "none"
            return (code.isEmpty ? "none" : code, nil)
        }
    }
}

/// The shared servers, each started once.
final class ClientMatrixPeers: @unchecked Sendable {
    private let run: MatrixRun
    private let tls: TLSMaterial
    private let lock = NSLock()
    private var started: [MatrixPeerKey: MatrixEchoPeer] = [:]

    init(run: MatrixRun, tls: TLSMaterial) {
        self.run = run
        self.tls = tls
    }

    func shared(_ key: MatrixPeerKey) throws -> MatrixEchoPeer {
        if let peer = lock.withLock({ started[key] }) { return peer }
        let peer = try MatrixEchoPeer(key, run: run, tls: tls, name: "\(key.peer)-\(key.listen)-\(key.flavor)")
        return lock.withLock {
            if let other = started[key] { peer.process.kill(); return other }
            started[key] = peer
            return peer
        }
    }

    func own(_ key: MatrixPeerKey, name: String) throws -> MatrixEchoPeer {
        try MatrixEchoPeer(key, run: run, tls: tls, name: name)
    }
}

/// One case of the client matrix: its input, what must come back, and how it is run.
struct ClientMatrixCase: CustomStringConvertible, Sendable {
    let values: PairwiseCase
    let peer, transport, deflate, format, mode, conversation: String
    let size: Int

    init(_ values: PairwiseCase) {
        self.values = values
        peer = values["peer"]
        transport = values["transport"]
        deflate = values["deflate"]
        format = values["format"]
        mode = values["mode"]
        size = Int(values["size"]) ?? 0
        conversation = values["conversation"]
    }

    var description: String { values.description }
    var path: String { "/case-\(values.number)" }
    var binary: Bool { format == "binary" || format == "base64" }
    var restarts: Bool { mode.hasPrefix("restart") }
    /// --send's message, which --expect waits to see echoed (--jsonl's: JSON, --expect-json).
    var preamble: String { format == "jsonl" ? #"{"preamble":\#(values.number)}"# : "preamble-\(values.number)" }
    /// --until comes with --print-match-only: nothing but the match reaches stdout, so a
    /// restart cannot wait for the first part's echo (it waits a while).
    var printsMatchOnly: Bool { conversation == "until" }

    var peerKey: MatrixPeerKey {
        let flavored = peer == "websocat" || peer == "wspipe-exec"
        return MatrixPeerKey(peer: peer, listen: transport == "proxy" ? "ws" : transport,
                             flavor: flavored ? (binary ? "binary" : "text") : "")
    }

    /// --exec cat is a byte stream: it keeps lines, not binary messages' boundaries.
    var keepsBoundaries: Bool { !(peer == "wspipe-exec" && binary) }

    var flags: [String] {
        var flags: [String] = []
        switch deflate {
        case "no-deflate": flags += ["--no-deflate"]
        case "client-no-context-takeover": flags += ["--deflate-client-no-context-takeover"]
        case "window-bits-9": flags += ["--deflate-client-window-bits", "9", "--deflate-server-window-bits", "9"]
        default: break
        }
        switch format {
        case "jsonl": flags += ["--jsonl"]
        case "binary": flags += ["-b"]
        case "base64": flags += ["-b", "--base64"]
        case "whole-input": flags += ["--whole-input"]
        default: break
        }
        switch mode {
        case "reconnect", "restart", "restart-killed": flags += ["--reconnect", "--retry-delay", "0.05", "--retry-max-delay", "0.2"]
        case "ping-interval": flags += ["--ping-interval", "0.1", "--print-ping-rtt"]
        default: break
        }
        switch conversation {
        case "expect": flags += ["--send", preamble] + (format == "jsonl" ? ["--expect-json", "preamble=\(values.number)"] : ["--expect", "^\(preamble)$"])
        // --jsonl's marker is a JSON text message: --until-json; the others' a plain one.
        case "until": flags += (format == "jsonl" ? ["--until-json", "until=\(values.number)"] : ["--until", "until-\(values.number)"])
            + ["--print-match-only"]
        default: break
        }
        return flags
    }

    /// A text message as the format writes it to stdout.
    private func written(_ text: String) -> [UInt8] {
        switch format {
        case "jsonl": return Array(#"{"type":"text","data":"\#(text.replacingOccurrences(of: "\"", with: "\\\""))"}"#.utf8) + [0x0A]
        case "binary": return Array(text.utf8)
        default: return Array(text.utf8) + [0x0A]
        }
    }

    /// What stdout holds before the restart's stop (and what must be there by then), and
    /// in all: the preamble's echo comes first on each connection.
    var output: (beforeStop: [UInt8], all: [UInt8]) {
        let (parts, expected, _) = input
        switch conversation {
        case "expect":
            let echo = written(preamble)
            // --whole-input's message goes at the end of stdin, after the restart.
            let first = format == "whole-input" ? [] : parts[0]
            let rest = format == "whole-input" ? expected : Array(expected.dropFirst(first.count))
            return restarts ? (echo + first, echo + first + echo + rest) : (echo + first, echo + expected)
        case "until":
            // The marker message alone: the last line, or the whole input.
            let lines = expected.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast()
            return ([], format == "whole-input" ? expected : Array(lines.last ?? []) + [0x0A])
        default:
            return (format == "whole-input" ? [] : parts[0], expected)
        }
    }

    /// stdin in three parts (a restart case stops the server after the first and starts it
    /// after the second), and what must come out.
    var input: (parts: [[UInt8]], expected: [UInt8], sentBytes: Int) {
        let seed = values.number * 10
        switch format {
        case "text", "jsonl", "base64":
            var lines = (0..<3).map { i -> [UInt8] in
                switch format {
                case "text": return Array((MatrixPayload.text(size, seed: seed + i) + "\n").utf8)
                case "jsonl": return Array(#"{"type":"text","data":"\#(MatrixPayload.text(size, seed: seed + i))"}"#.utf8) + [0x0A]
                default: return Array((Data(MatrixPayload.bytes(size, seed: seed + i)).base64EncodedString() + "\n").utf8)
                }
            }
            guard conversation == "until" else { return (lines, lines.flatMap { $0 }, 3 * size) }
            // The last line is the marker --until waits for.
            let marker = format == "jsonl" ? #"{"until":\#(values.number)}"# : "until-\(values.number)"
            lines[2] += written(marker)
            return (lines, lines.flatMap { $0 }, 3 * size + marker.utf8.count)
        case "binary":
            let bytes = MatrixPayload.bytes(size, seed: seed)
            return (thirds(bytes), bytes, size)
        default: // whole-input: one message with newlines inside
            var bytes = Array(MatrixPayload.text(size, seed: seed).utf8)
            for i in stride(from: 60, to: bytes.count, by: 61) { bytes[i] = 0x0A }
            // --until's marker first (only a message's first MiB is examined), in place of
            // the first bytes: the size stays under websocat's buffer and Python's max_size.
            if conversation == "until" {
                let marker = Array("until-\(values.number)\n".utf8)
                bytes = marker + bytes.dropFirst(marker.count)
            }
            return (thirds(bytes), bytes + [0x0A], bytes.count)
        }
    }

    private func thirds(_ bytes: [UInt8]) -> [[UInt8]] {
        let a = bytes.count / 3, b = 2 * bytes.count / 3
        return [Array(bytes[..<a]), Array(bytes[a..<b]), Array(bytes[b...])]
    }

    func url(_ server: MatrixEchoPeer) -> String {
        switch transport {
        case "wss": return "wss://127.0.0.1:\(server.port)\(path)"
        case "unix": return "ws+unix://\(server.socketPath ?? ""):\(path)"
        default: return "ws://127.0.0.1:\(server.port)\(path)"
        }
    }

    func run(peers: ClientMatrixPeers, proxyPort: Int, tls: TLSMaterial, in matrix: MatrixRun) throws {
        let server = restarts ? try peers.own(peerKey, name: "r\(values.number)") : try peers.shared(peerKey)
        var arguments = flags
        if transport == "wss" { arguments += ["--cacert", tls.caCert] }
        if transport == "proxy" { arguments += ["--proxy", "http://127.0.0.1:\(proxyPort)"] }
        arguments.append(url(server))
        let command = "wspipe " + arguments.joined(separator: " ") + "   # peer: \(server.key)"
        func fail(_ text: String) { matrix.fail("\(self): \(text)\n    \(command)") }

        let (parts, _, sentBytes) = input
        let (beforeStop, expected) = output
        let client = try matrix.spawn(Locations.wspipe, arguments, stdin: .pipe)
        client.writeStdin(parts[0])
        switch mode {
        case "restart", "restart-killed":
            // Wait for the first part's echo (nothing in flight), stop, queue, start, go on.
            // Lines come back as they were written (--jsonl adds connection events around
            // them); -b's bytes, and --exec cat's base64 lines, in other pieces; --whole-input
            // comes back only at the end (its preamble's echo, though, at once).
            let firstBack: (([UInt8]) -> Bool)? = beforeStop.isEmpty ? nil
                : keepsBoundaries && format != "binary" && format != "jsonl" ? { $0.starts(with: beforeStop) }
                : format == "jsonl" ? { $0.firstRange(of: parts[0]) != nil } : { $0.count >= beforeStop.count }
            if let firstBack {
                guard client.stdout.wait(timeout: 30, until: firstBack) else {
                    fail("the first part did not come back before the restart; stdout \(client.stdout.bytes.count) bytes, stderr:\n\(client.stderr.text)")
                    return
                }
            } else {
                usleep(printsMatchOnly ? 500_000 : 300_000)
            }
            try server.stop(mode == "restart" ? SIGTERM : SIGKILL)
            client.writeStdin(parts[1])
            usleep(100_000)
            try server.start()
            client.writeStdin(parts[2])
        case "ping-interval":
            // Mid-stream, until a keepalive ping has come back (checked below).
            _ = client.stderr.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("wspipe: ping round trip") }
            client.writeStdin(parts[1] + parts[2])
        default:
            client.writeStdin(parts[1] + parts[2])
        }
        // --until ends the run at its marker: stdin stays open (but for --whole-input, whose
        // message goes at its end).
        if conversation != "until" || format == "whole-input" { client.closeStdin() }
        let result = client.wait(timeout: 60)
        if result.termination != .exited(0) {
            fail("exit: \(result.termination), expected exit status 0; stderr:\n\(result.stderr)")
        }
        checkOutput(result.stdout, expected: expected, fail: fail)
        // Quiet but for what the flags ask: ping round trips, and a restart's two lines.
        let expectedNotes = ["wspipe: ping round trip"] + (restarts ? ["wspipe: disconnected after ", "wspipe: reconnected after "] : [])
        let stderrLines = result.stderr.split(separator: "\n").filter { line in !expectedNotes.contains { line.hasPrefix($0) } }
        if !stderrLines.isEmpty {
            fail("unexpected stderr:\n\(stderrLines.prefix(5).joined(separator: "\n"))")
        }
        if mode == "ping-interval" && !result.stderr.contains("wspipe: ping round trip") {
            fail("no keepalive ping came back; stderr:\n\(result.stderr)")
        }
        if let reports = server.reports(path: path) {
            if reports.last?.code != "1000" {
                fail("the peer's record of the close: \(reports.map(\.code)) (expected the last to be 1000)")
            }
            // A killed server reports nothing of its connection: count what came after it.
            let firstPart = format == "binary" ? parts[0].count : format == "whole-input" ? 0 : size
            // --send's message on each connection the peer reports.
            let preambles = conversation == "expect" ? preamble.utf8.count * reports.count : 0
            let expected = (mode == "restart-killed" ? sentBytes - firstPart : sentBytes) + preambles
            let counted = reports.compactMap(\.bytes)
            // Unseen (--print-match-only), the first part may have gone only after the kill.
            let alsoExpected = printsMatchOnly && mode == "restart-killed" ? sentBytes : expected
            if !counted.isEmpty && ![expected, alsoExpected].contains(counted.reduce(0, +)) {
                fail("the peer received \(counted) payload bytes over \(reports.count) connection(s), expected \(expected) in all")
            }
        }
    }

    private func checkOutput(_ output: [UInt8], expected: [UInt8], fail: (String) -> Void) {
        if printsMatchOnly {
            compare(output, expected, fail: fail)  // the match alone: no event, no close line
        } else if format == "jsonl" {
            // Messages are "text" lines (the input has no binary ones); --reconnect adds
            // connecting/connected/disconnected events, and the Close the server answered.
            let lines = output.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
            let closes = lines.filter { $0.hasPrefix(#"{"type":"close""#) }
            // A completed preamble (one --send) is an event on every connection.
            let resubscribed = lines.filter { $0 == #"{"type":"resubscribed","messages":1}"# }.count
            if resubscribed != (conversation == "expect" ? (restarts ? 2 : 1) : 0) {
                fail("\(resubscribed) resubscribed event(s) for \(restarts ? 2 : 1) connection(s)")
            }
            let data = lines.filter { $0.hasPrefix(#"{"type":"text""#) }.map { $0 + "\n" }.joined()
            compare(Array(data.utf8), expected, fail: fail)
            // websocat answers a Close with an empty one: no code.
            let acceptedEnds = peer == "websocat" ? [#""code":1000"#, #""code":null"#] : [#""code":1000"#]
            if !acceptedEnds.contains(where: { closes.last?.contains($0) == true }) || (!restarts && closes.count != 1) {
                fail("close lines: \(closes)")
            }
        } else if !keepsBoundaries && format == "base64" {
            let decode = { (bytes: [UInt8]) in
                bytes.split(separator: 0x0A).flatMap { line -> [UInt8] in Array(Data(base64Encoded: Data(line)) ?? Data("?".utf8)) }
            }
            compare(decode(output), decode(expected), fail: fail)
        } else {
            compare(output, expected, fail: fail)
        }
    }

    /// Equal, or a description: for lines, which were lost, doubled or out of order.
    private func compare(_ output: [UInt8], _ expected: [UInt8], fail: (String) -> Void) {
        guard output != expected else { return }
        let mismatch = zip(output, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(output.count, expected.count)
        let around = { (bytes: [UInt8]) in String(reflecting: String(decoding: bytes[max(0, mismatch - 30)..<min(bytes.count, mismatch + 30)], as: UTF8.self)) }
        var text = "output differs: \(output.count) bytes, expected \(expected.count); first difference at byte \(mismatch): "
            + "\(around(output)), expected \(around(expected))"
        if format != "binary" {
            let got = output.split(separator: 0x0A).map { Array($0) }
            let want = expected.split(separator: 0x0A).map { Array($0) }
            let lost = want.filter { !got.contains($0) }.count
            let doubled = got.count - Set(got.map { Data($0) }).count
            let ordered = got.compactMap { line in want.firstIndex(of: line) } == got.compactMap { line in want.firstIndex(of: line) }.sorted()
            text += "; lines: \(got.count) of \(want.count), \(lost) lost, \(doubled) doubled, order \(ordered ? "kept" : "broken")"
        }
        fail(text)
    }
}
