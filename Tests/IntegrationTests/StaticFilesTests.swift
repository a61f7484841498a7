// --static DIR and --devconsole against the real binary, read by a raw HTTP/1.1 client
// (peers/http_client.py): validators and 304 (not for a date ahead of our clock), HEAD,
// one Range, 405, the 301 from the raw target, absolute-form targets, the path rules, 403
// for what may not be read, keep-alive and pipelining, the plain-GET order, the bearer
// token, TLS, the warning of --static /, and the memory of 100 slow downloads of a 1 GiB file.
import Foundation
import Glibc
import TestSupport
import XCTest

final class StaticFilesTests: IntegrationTestCase {
    struct Answer: Decodable {
        var status: Int?
        var headers: [[String]]?
        var length: Int?
        var body: String?
        var sha256: String?
        var closed: Bool?

        func header(_ name: String) -> String? {
            headers?.first { $0.first?.lowercased() == name.lowercased() }.flatMap { $0.count > 1 ? $0[1] : nil }
        }
    }

    /// www/: index.html, a.txt, app.js, sub/ (index.html), noindex/, .env, link -> /etc/passwd,
    /// the literal directory "x%0d%0aSet-Cookie:%20a=b".
    private func makeTree() throws -> String {
        let root = path("www")
        let files = ["index.html": "<h1>home</h1>\n", "a.txt": "hello static\n", "app.js": "let x = 1;\n",
                     "sub/index.html": "<p>sub</p>\n", "noindex/data.bin": "\u{1}\u{2}", ".env": "SECRET=1\n",
                     "x%0d%0aSet-Cookie:%20a=b/index.html": "hostile\n"]
        for (name, text) in files {
            let file = root + "/" + name
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        }
        try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: "/etc/passwd")
        try FileManager.default.createSymbolicLink(atPath: root + "/linkdir", withDestinationPath: "/etc")
        return root
    }

    /// The requests on one connection (pipelined with `sendAll`); each answer, then whether it closed.
    private func exchange(_ port: Int, _ requests: [[String: Any]], sendAll: Bool = false, tls: Bool = false) throws -> [Answer] {
        let spec = String(decoding: try JSONSerialization.data(withJSONObject: requests), as: UTF8.self)
        let child = try ChildProcess(executable: Locations.python,
                                     arguments: ["\(Locations.peers)/http_client.py", String(port), spec] + (sendAll ? ["--send-all"] : [])
                                        + (tls ? ["--tls"] : []),
                                     environment: Locations.baseEnvironment, stdin: .null)
        let result = finish(child, timeout: 60)
        let answers = try result.stdoutText.split(separator: "\n").map { try JSONDecoder().decode(Answer.self, from: Data($0.utf8)) }
        XCTAssertEqual(answers.count, requests.count + 1, result.stdoutText + result.stderr)
        guard answers.count == requests.count + 1 else { throw HarnessError("the HTTP client read \(answers.count) answers") }
        return answers
    }

    func testAFileCarriesItsTypeLengthAndValidatorsAndBothValidatorsGive304OnOneConnection() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root])
        let first = try exchange(port, [["target": "/a.txt"], ["target": "/app.js"], ["method": "HEAD", "target": "/index.html"]])
        XCTAssertEqual(first[0].status, 200)
        XCTAssertEqual(first[0].body, "hello static\n")
        XCTAssertEqual(first[0].header("Content-Type"), "text/plain; charset=utf-8")
        XCTAssertEqual(first[0].header("Content-Length"), "13")
        XCTAssertEqual(first[1].header("Content-Type"), "text/javascript; charset=utf-8")
        XCTAssertEqual(first[2].status, 200)
        XCTAssertEqual(first[2].header("Content-Length"), "14", "HEAD says the GET's length")
        XCTAssertEqual(first[3].closed, false, "HTTP/1.1 keeps the connection")
        let etag = try XCTUnwrap(first[0].header("ETag"))
        let modified = try XCTUnwrap(first[0].header("Last-Modified"))
        XCTAssertTrue(modified.hasSuffix(" GMT") && modified.count == 29, modified)

        let conditional = try exchange(port, [
            ["target": "/a.txt", "headers": ["If-None-Match": etag]],
            ["target": "/a.txt", "headers": ["If-None-Match": "W/" + etag + ", \"other\""]],
            ["target": "/a.txt", "headers": ["If-Modified-Since": modified]],
            // If-None-Match decides when both are there (RFC 9110 §13.1.3): no match, 200.
            ["target": "/a.txt", "headers": ["If-None-Match": "\"other\"", "If-Modified-Since": modified]],
            ["target": "/a.txt", "headers": ["If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"]],
            ["target": "/a.txt", "headers": ["Connection": "close"]],
        ])
        XCTAssertEqual(conditional.map(\.status), [304, 304, 304, 200, 200, 200, nil])
        XCTAssertEqual(conditional[0].header("ETag"), etag)
        XCTAssertEqual(conditional[3].body, "hello static\n")
        XCTAssertEqual(conditional[5].header("Connection"), "close")
        XCTAssertEqual(conditional[6].closed, true, "Connection: close ends it")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// A client whose clock is ahead sends a date later than ours: evaluated, it would keep
    /// its stale copy of a file changed since (Apache ignores such a date too).
    func testAnIfModifiedSinceLaterThanTheServersClockIsIgnored() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root])
        let modified = try XCTUnwrap(try exchange(port, [["target": "/a.txt"]])[0].header("Last-Modified"))
        let answers = try exchange(port, [
            ["target": "/a.txt", "headers": ["If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"]],
            ["target": "/a.txt", "headers": ["If-Modified-Since": modified]],
        ])
        XCTAssertEqual(answers.map(\.status), [200, 304, nil])
        XCTAssertEqual(answers[0].body, "hello static\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// RFC 9112 §3.2.2: a server MUST accept the absolute-form. Its path is answered as the
    /// origin-form's would be, by every plain-GET answer and the upgrade; the authority
    /// names nothing (another host's name is the same site).
    func testAbsoluteFormTargetsAreAnsweredByTheirPath() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root, "--devconsole", "--path", "/ws",
                                                 "--health", "/healthz", "--metrics", "/metrics"])
        let upgrade = ["Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                       "Sec-WebSocket-Version": "13"]
        let answers = try exchange(port, [
            ["target": "http://127.0.0.1:\(port)/a.txt"],
            ["target": "http://other.example"],
            ["target": "HTTP://other.example:81/sub?q=1"],
            ["target": "http://127.0.0.1/.env"],
            ["target": "http://127.0.0.1/%2e%2e/etc/passwd"],
            ["target": "http://127.0.0.1//a.txt"],
            ["target": "http://127.0.0.1/ws"],
            ["target": "ws://127.0.0.1/ws", "headers": upgrade],
        ])
        XCTAssertEqual(answers.map(\.status), [200, 200, 301, 404, 404, 404, 200, 101, nil])
        XCTAssertEqual(answers[0].body, "hello static\n")
        XCTAssertEqual(answers[1].body, "<h1>home</h1>\n")
        XCTAssertEqual(answers[2].header("Location"), "/sub/?q=1", "our path, not the other host")
        XCTAssertTrue(answers[6].body?.hasPrefix("<!DOCTYPE html>") == true, answers[6].body ?? "")
        XCTAssertEqual(try exchange(port, [["target": "http://127.0.0.1/healthz?probe=1"]])[0].body, "ok\n")
        let scrape = try exchange(port, [["target": "http://127.0.0.1/metrics"]])
        XCTAssertEqual(scrape[0].status, 200)
        XCTAssertTrue(scrape[0].header("Content-Type")?.hasPrefix("text/plain") == true, "\(scrape[0])")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testPipelinedRequestsAreAnsweredInOrderAndAnUpgradeMayFollow() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root])
        let key = "dGhlIHNhbXBsZSBub25jZQ=="
        let answers = try exchange(port, [["target": "/a.txt"], ["method": "HEAD", "target": "/app.js"], ["target": "/sub/"],
                                          ["target": "/nothing"], ["target": "/a.txt", "headers": ["Range": "bytes=6-"]],
                                          ["target": "/", "headers": ["Upgrade": "websocket", "Connection": "Upgrade",
                                                                      "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13"]]],
                                   sendAll: true)
        XCTAssertEqual(answers.map(\.status), [200, 200, 200, 404, 206, 101, nil])
        XCTAssertEqual(answers[0].body, "hello static\n")
        XCTAssertEqual(answers[2].body, "<p>sub</p>\n")
        XCTAssertEqual(answers[4].body, "static\n")
        XCTAssertEqual(answers[5].header("Sec-WebSocket-Accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// A body we do not read must end the connection, whatever else its Content-Length
    /// lines say: with "0" first and "40" after it, the 40 bytes were read as a second
    /// request (a proxy that takes the last length sees one request, we answered two).
    func testARepeatedContentLengthEndsTheConnectionInsteadOfReadingTheBodyAsARequest() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root])
        let smuggled = "GET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n"
        let raw = "GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: \(smuggled.utf8.count)\r\n\r\n" + smuggled
        let answers = try exchange(port, [["raw": raw]])
        XCTAssertEqual(answers[0].status, 200)
        XCTAssertEqual(answers[0].header("Connection"), "close")
        XCTAssertEqual(answers[1].closed, true, "the body is no request: nothing more is answered")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// HTTP/1.0 clients (no Host needed) get files; kept alive only when they ask. An
    /// HTTP/1.0 WebSocket upgrade is still refused (RFC 6455 needs HTTP/1.1).
    func testHTTP10RequestsGetFilesAndKeepAliveOnlyWhenAsked() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root])
        let plain = try exchange(port, [["raw": "GET /a.txt HTTP/1.0\r\n\r\n"]])
        XCTAssertEqual(plain[0].status, 200)
        XCTAssertEqual(plain[0].body, "hello static\n")
        XCTAssertEqual(plain[1].closed, true)
        let kept = try exchange(port, [["raw": "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"],
                                       ["raw": "HEAD /app.js HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"]])
        XCTAssertEqual(kept.map(\.status), [200, 200, nil])
        XCTAssertEqual(kept[0].header("Connection"), "keep-alive")
        XCTAssertEqual(kept[2].closed, false)
        let upgrade = try exchange(port, [["raw": "GET / HTTP/1.0\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                                 + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"]])
        XCTAssertEqual(upgrade[0].status, 400)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testOneRangeIs206AndOnePastTheEndIs416() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root])
        let answers = try exchange(port, [
            ["target": "/a.txt", "headers": ["Range": "bytes=0-4"]],
            ["target": "/a.txt", "headers": ["Range": "bytes=-7"]],
            ["target": "/a.txt", "headers": ["Range": "bytes=13-"]],
            ["target": "/a.txt", "headers": ["Range": "bytes=0-1,4-5"]],  // several ranges: the whole file
            ["target": "/a.txt", "headers": ["Range": "bytes=0-4", "If-Range": "\"stale\""]],
        ])
        XCTAssertEqual(answers.map(\.status), [206, 206, 416, 200, 200, nil])
        XCTAssertEqual(answers[0].body, "hello")
        XCTAssertEqual(answers[0].header("Content-Range"), "bytes 0-4/13")
        XCTAssertEqual(answers[1].body, "static\n")
        XCTAssertEqual(answers[2].header("Content-Range"), "bytes */13")
        XCTAssertEqual(answers[0].header("Accept-Ranges"), "bytes")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testOtherMethodsGet405AndADirectoryWithoutItsSlashA301FromTheRawTarget() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root])
        let answers = try exchange(port, [
            ["method": "POST", "target": "/a.txt", "headers": ["Content-Length": "0"]],
            ["method": "DELETE", "target": "/sub"],
            ["target": "/sub?q=1"],
            ["target": "/s%75b"],
            ["target": "/sub?next=//other.example"],
            ["target": "/x%250d%250aSet-Cookie:%2520a=b"],
            ["target": "/x%250d%250aSet-Cookie:%2520a=b/"],
        ])
        XCTAssertEqual(answers.map(\.status), [405, 405, 301, 301, 301, 301, 200, nil])
        XCTAssertEqual(answers[0].header("Allow"), "GET, HEAD")
        XCTAssertEqual(answers[2].header("Location"), "/sub/?q=1")
        XCTAssertEqual(answers[3].header("Location"), "/s%75b/", "the raw target, not its decoded bytes")
        XCTAssertEqual(answers[4].header("Location"), "/sub/?next=//other.example")
        XCTAssertEqual(answers[5].header("Location"), "/x%250d%250aSet-Cookie:%2520a=b/")
        XCTAssertNil(answers[5].header("Set-Cookie"))
        XCTAssertEqual(answers[6].body, "hostile\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testEscapesDotfilesLinksAndDirectoriesWithoutIndexAre404() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root])
        let targets = ["/.env", "/%2eenv", "/../etc/passwd", "/%2e%2e/etc/passwd", "/sub/%2e%2e/a.txt", "/..%2fa.txt",
                       "/sub%2f..%2fa.txt", "/a%5c.txt", "/sub\\..\\a.txt", "/a.txt%00", "/link", "/linkdir/passwd",
                       "/noindex/", "/a.txt/", "/%252e%252e/a.txt", "/%zz", "//a.txt", "/sub//index.html"]
        let answers = try exchange(port, targets.map { ["target": $0] })
        XCTAssertEqual(answers.dropLast().map(\.status), Array(repeating: 404, count: targets.count),
                       zip(targets, answers).map { "\($0) \($1.status ?? 0)" }.joined(separator: ", "))
        XCTAssertFalse(answers.contains { $0.body?.contains("root:") == true || $0.body?.contains("SECRET") == true })
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// -v says why each 404 was answered, in --dir's words (the path rules', the resolver's).
    func testEach404HasAVerboseLineSayingWhy() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["-v", "--echo", "--static", root])
        let refused = [("/.env", "the path names a dotfile or dot-directory '.env'"),
                       ("/%2e%2e/etc/passwd", "the path has a . or .. segment"),
                       ("//a.txt", "the path has an empty segment (//)"),
                       ("/link", "a symbolic link is on the path"),
                       ("/missing.txt", "no such file"),
                       ("/noindex/", "a directory without index.html (no such file)"),
                       ("/a.txt/", "a file asked for with a trailing slash")]
        let answers = try exchange(port, refused.map { ["target": $0.0] })
        XCTAssertEqual(answers.dropLast().map(\.status), Array(repeating: 404, count: refused.count))
        for (target, why) in refused {
            let expected = "wspipe: * 404 for \(target): \(why)\n"
            XCTAssertTrue(server.stderr.wait(timeout: 10) { String(decoding: $0, as: UTF8.self).contains(expected) },
                          "no '\(expected)' in \(server.stderr.text)")
        }
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// `wspipe -l 0 ARGUMENTS` bound by file modes. Root passes every mode
    /// (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so as root it runs under setpriv without
    /// those two capabilities; skipped, saying why, when that cannot be done.
    private func startListeningBoundByFileModes(_ arguments: [String]) throws -> (ChildProcess, Int) {
        guard getuid() == 0 else { return try startListening(arguments) }
        let setpriv = try Tool.setpriv.path(), dropped = ["--bounding-set", "-dac_override,-dac_read_search"]
        guard let probe = try? ChildProcess(executable: setpriv, arguments: dropped + ["/bin/true"], environment: [:], stdin: .null),
              finish(probe).termination == .exited(0) else {
            throw XCTSkip("running as root, which reads a mode-000 file, and setpriv cannot drop CAP_DAC_OVERRIDE here")
        }
        let child = try ChildProcess(executable: setpriv, arguments: dropped + [Locations.wspipe, "-l", "0"] + arguments,
                                     environment: Locations.baseEnvironment, stdin: .null)
        addTeardownBlock { child.kill() }
        guard let text = child.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let port = Int(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            XCTFail("no listening line; stderr: \(child.stderr.text)")
            throw HarnessError("server did not start")
        }
        return (child, port)
    }

    /// A file that is there but may not be read, or a directory on the way that may not be
    /// searched, is 403 as nginx answers (EACCES); what the path rules or the resolver refuse
    /// before asking (dotfiles, symbolic links) stays 404 whatever its mode. A directory that
    /// may be searched but not read still serves its index.html (no listing is read).
    func testAFileThatMayNotBeReadIs403AndCountedWithItsReason() throws {
        let root = try makeTree()
        for (name, text) in [("secret.txt", "no\n"), ("locked/x.txt", "no\n"), ("searchonly/index.html", "<p>searched</p>\n"),
                             (".private", "no\n")] {
            let file = root + "/" + name
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        }
        try FileManager.default.createSymbolicLink(atPath: root + "/secretlink", withDestinationPath: "secret.txt")
        for (name, mode) in [("secret.txt", 0o000), ("locked", 0o000), ("searchonly", 0o311), (".private", 0o000)] as [(String, mode_t)] {
            XCTAssertEqual(chmod(root + "/" + name, mode), 0, name)
        }
        defer { for name in ["locked", "searchonly"] { chmod(root + "/" + name, 0o755) } }  // so the cleanup can remove them
        let (server, port) = try startListeningBoundByFileModes(["-v", "--echo", "--static", root, "--metrics", "/m"])
        let answers = try exchange(port, [
            ["target": "/secret.txt"], ["method": "HEAD", "target": "/secret.txt"], ["target": "/locked/x.txt"],
            ["target": "/locked/"], ["target": "/searchonly/"], ["target": "/.private"], ["target": "/secretlink"],
            ["target": "/locked/missing"],
        ])
        XCTAssertEqual(answers.map(\.status), [403, 403, 403, 403, 200, 404, 404, 403, nil])
        XCTAssertEqual(answers[0].body, "forbidden\n")
        XCTAssertEqual(answers[4].body, "<p>searched</p>\n")
        for (status, target, why) in [(403, "/secret.txt", "permission denied"), (403, "/locked/x.txt", "permission denied"),
                                      (403, "/locked/", "the directory's index.html: permission denied"),
                                      (404, "/.private", "the path names a dotfile or dot-directory '.private'"),
                                      (404, "/secretlink", "a symbolic link is on the path")] {
            let expected = "wspipe: * \(status) for \(target): \(why)\n"
            XCTAssertTrue(server.stderr.wait(timeout: 10) { String(decoding: $0, as: UTF8.self).contains(expected) },
                          "no '\(expected)' in \(server.stderr.text)")
        }
        let scraper = try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/metrics.py", "scrape",
                                                                               "http://127.0.0.1:\(port)/m"],
                                       environment: Locations.baseEnvironment, stdin: .null)
        let counts = finish(scraper, timeout: 30).stdoutText
        XCTAssertTrue(counts.contains("wspipe_http_requests_total{status=403} 5\n") && counts.contains("wspipe_http_requests_total{status=404} 2\n"),
                      counts)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// `--static /` is served (nothing refuses it), with one warning at start, as a
    /// --forward-listen on another host's reach has; -q hides it.
    func testServingTheRootDirectoryWarnsOnceAtStart() throws {
        for root in ["/", "/etc/.."] {
            let (server, port) = try startListening(["--echo", "--static", root])
            let warning = "wspipe: warning: --static '\(root)' is the root directory: whoever reaches this listener can read "
                + "every file this process may read (dotfiles aside)\n"
            XCTAssertEqual(server.stderr.text.components(separatedBy: warning).count, 2, server.stderr.text)
            XCTAssertEqual(try exchange(port, [["target": "/etc/passwd"]])[0].status, 200)
            server.signal(SIGTERM)
            assertDiedOf(finish(server), SIGTERM)
        }
        let (quiet, _) = try startListening(["-q", "--echo", "--static", "/"])
        let (elsewhere, _) = try startListening(["--echo", "--static", try makeTree()])
        for server in [quiet, elsewhere] {
            server.signal(SIGTERM)
            let ended = finish(server)
            assertDiedOf(ended, SIGTERM)
            XCTAssertFalse(ended.stderr.contains("warning"), ended.stderr)
        }
    }

    func testPlainGetsGoToHealthThenFilesThenTheConsoleThen426() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--health", "/healthz", "--static", root, "--devconsole", "--path", "/ws"])
        let answers = try exchange(port, [["target": "/healthz"]])
        XCTAssertEqual(answers[0].body, "ok\n")
        let rest = try exchange(port, [["target": "/a.txt"], ["target": "/ws"], ["target": "/ws?x=1"], ["target": "/other"],
                                       ["method": "HEAD", "target": "/ws"]])
        XCTAssertEqual(rest.map(\.status), [200, 200, 200, 404, 200, nil])
        XCTAssertEqual(rest[1].header("Content-Type"), "text/html; charset=utf-8")
        XCTAssertTrue(rest[1].body?.hasPrefix("<!DOCTYPE html>") == true, rest[1].body ?? "")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)

        // Without --static and --devconsole a plain GET is still 426.
        let (plain, plainPort) = try startListening(["--echo"])
        XCTAssertEqual(try exchange(plainPort, [["target": "/a.txt"]])[0].status, 426)
        plain.signal(SIGTERM)
        assertDiedOf(finish(plain), SIGTERM)
    }

    func testWithDirTheConsoleIsOnlyAtAProgramsPath() throws {
        let programs = path("scripts")
        try FileManager.default.createDirectory(atPath: programs, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: programs + "/count", contents: Data("#!/bin/sh\necho 1\n".utf8),
                                       attributes: [.posixPermissions: 0o755])
        let (server, port) = try startListening(["--dir", programs, "--devconsole"])
        let answers = try exchange(port, [["target": "/count"], ["target": "/count/more?x=1"], ["target": "/nothing"]])
        XCTAssertEqual(answers.map(\.status), [200, 200, 404, nil])
        XCTAssertTrue(answers[0].body?.hasPrefix("<!DOCTYPE html>") == true)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testTheConsolePageIsSelfContained() throws {
        let (server, port) = try startListening(["--echo", "--devconsole"])
        let page = try exchange(port, [["target": "/any/path"]])
        let body = try XCTUnwrap(page.first?.body)
        XCTAssertEqual(page.first?.status, 200)
        // The first 200 bytes are in `body`; the whole page is checked through its hash's source.
        XCTAssertTrue(body.hasPrefix("<!DOCTYPE html>"))
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
        let source = try String(contentsOfFile: Locations.packageRoot + "/Sources/WebSocketEngine/DevConsolePage.swift", encoding: .utf8)
        for external in ["src=", "href=", "@import", "url(", "http://", "https://"] {
            XCTAssertFalse(source.contains(external), "the console page refers to something outside it: \(external)")
        }
    }

    func testRequireBearerCoversStaticFiles() throws {
        let root = try makeTree()
        let (server, port) = try startListening(["--echo", "--static", root, "--require-bearer", "--health", "/h"],
                                                environment: ["WSPIPE_BEARER": "tok3n"])
        let answers = try exchange(port, [["target": "/a.txt"], ["target": "/a.txt", "headers": ["Authorization": "Bearer tok3n"]],
                                          ["target": "/h"]])
        XCTAssertEqual(answers.map(\.status), [401, 200, 200, nil])
        XCTAssertEqual(answers[0].header("WWW-Authenticate"), "Bearer realm=\"wspipe\"")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testFilesAreServedOverTLSInChunks() throws {
        let root = try makeTree()
        let big = randomBytes(1_000_003)
        try Data(big).write(to: URL(fileURLWithPath: root + "/big.bin"))
        let tls = try TLSMaterial.shared()
        let (server, port) = try startListening(["--cert", tls.serverCert, "--key", tls.serverKey, "--echo", "--static", root], scheme: "wss")
        let answers = try exchange(port, [["target": "/big.bin"], ["target": "/a.txt"]], tls: true)
        XCTAssertEqual(answers.map(\.status), [200, 200, nil])
        XCTAssertEqual(answers[0].length, big.count)
        XCTAssertEqual(answers[0].sha256, sha256Hex(big))
        XCTAssertEqual(answers[0].header("Content-Type"), "application/octet-stream")
        XCTAssertEqual(answers[1].body, "hello static\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testAHundredSlowDownloadsOfAGigabyteKeepTheServerUnder32MiB() throws {
        let root = try makeTree()
        let file = root + "/huge.bin"
        let fd = open(file, O_CREAT | O_WRONLY, 0o644)
        XCTAssertEqual(ftruncate(fd, 1 << 30), 0)  // sparse: no disk used
        close(fd)
        let (server, port) = try startListening(["--echo", "--static", root])
        let child = try ChildProcess(executable: Locations.python,
                                     arguments: ["\(Locations.peers)/http_client.py", "slow", String(port), "/huge.bin", "100", "4"],
                                     environment: Locations.baseEnvironment, stdin: .null)
        let result = finish(child, timeout: 60)
        XCTAssertTrue(result.stdoutText.contains("\"connections\": 100"), result.stdoutText + result.stderr)
        XCTAssertTrue(result.stdoutText.contains("\"statuses\": [200]"), result.stdoutText)
        // Each read some: the server sent to all of them (at least 100 x 16 KiB in all).
        let read = Int(result.stdoutText.split(separator: "\"read\": ").last?.prefix { $0.isNumber } ?? "") ?? 0
        XCTAssertGreaterThan(read, 100 * 16_384, result.stdoutText)
        // VmHWM, not wait4's ru_maxrss: that one keeps the forked test runner's pages.
        let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
        let peak = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
            .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") })
        XCTAssertLessThan(peak, 32 * 1024, "peak RSS \(peak) KiB")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testAStaticDirectoryThatCannotBeOpenedIsAUsageError() throws {
        let result = try runWspipe(["-l", "0", "--echo", "--static", path("missing")])
        assertExit(result, 2)
        assertStderr(result, contains: "cannot serve --static '\(path("missing"))': No such file or directory")
        try Data("x".utf8).write(to: URL(fileURLWithPath: path("file")))
        let file = try runWspipe(["-l", "0", "--echo", "--staticdir", path("file")])
        assertExit(file, 2)
        assertStderr(file, contains: "not a directory")
    }

    func testAStaticDirectoryThatContainsOrIsInsideDirIsAUsageError() throws {
        let programs = path("scripts")
        try FileManager.default.createDirectory(atPath: programs + "/www", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: path("www"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: path("alias"), withDestinationPath: programs)
        for (files, dir, word) in [(programs + "/www", programs, "is inside"), (temporaryDirectory, programs, "contains"),
                                   (path("alias"), programs + "/", "is")] {
            let result = try runWspipe(["-l", "0", "--dir", dir, "--static", files])
            assertExit(result, 2)
            assertStderr(result, contains: "wspipe: --static '\(files)' \(word) --dir '\(dir)': it would serve the programs themselves")
        }
        // Beside each other is fine.
        let (server, port) = try startListening(["--dir", programs, "--staticdir", path("www")])
        XCTAssertEqual(try exchange(port, [["target": "/missing"]]).first?.status, 404)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testStaticFilesWorkBesideEveryMode() throws {
        let root = try makeTree()
        try FileManager.default.createDirectory(atPath: path("scripts"), withIntermediateDirectories: true)
        for mode in [["--echo"], ["--broadcast"], ["--sh", "cat"], ["--dir", path("scripts")], []] {
            // Standard input stays open: --broadcast ends at its end.
            let server = try spawnWspipe(["-l", "0"] + mode + ["--static", root], stdin: .pipe)
            let line = try XCTUnwrap(server.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15))
            let port = try XCTUnwrap(Int(line.split(separator: ":").last?.split(separator: "/").first ?? ""))
            XCTAssertEqual(try exchange(port, [["target": "/a.txt"]]).first?.body, "hello static\n", "\(mode)")
            server.signal(SIGTERM)
            _ = finish(server)
        }
    }
}

/// SHA-256 in hex, by the system's sha256sum (no crypto library in the tests).
func sha256Hex(_ bytes: [UInt8]) -> String {
    let file = NSTemporaryDirectory() + "sha-\(UUID().uuidString)"
    FileManager.default.createFile(atPath: file, contents: Data(bytes))
    defer { try? FileManager.default.removeItem(atPath: file) }
    guard let child = try? ChildProcess(executable: "/usr/bin/sha256sum", arguments: [file], environment: [:], stdin: .null) else { return "" }
    return String(String(decoding: child.wait(timeout: 30).stdout, as: UTF8.self).prefix(64))
}
