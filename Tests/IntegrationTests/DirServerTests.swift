// wspipe -l --dir DIR: a program per path, compared with websocketd 0.4.1 on the same tree
// for valid paths; every refused form answered 404 before the 101, and nothing run.
import Foundation
import Glibc
import TestSupport
import XCTest

final class DirServerTests: IntegrationTestCase {
    private var tree = ""
    private var outside = ""

    /// What each program prints: the CGI variables --dir sets from the path.
    private let printsVariables = #"echo "S=$SCRIPT_NAME P=$PATH_INFO T=$PATH_TRANSLATED U=$REQUEST_URI Q=$QUERY_STRING""#

    override func setUpWithError() throws {
        try super.setUpWithError()
        tree = path("tree")
        outside = path("outside")
        for directory in [tree, tree + "/sub", tree + "/sub/deep", tree + "/.git", outside] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        try script(tree + "/count", printsVariables)
        try script(tree + "/sub/deep/prog", printsVariables)
        try script(tree + "/fail", "echo failing; exit 3")
        try script(tree + "/hold", "echo ready; exec sleep 100")
        try script(tree + "/plain.txt", "touch '\(path("ran-plain"))'", mode: 0o644)
        try script(tree + "/.hidden", "touch '\(path("ran-hidden"))'")
        try script(tree + "/.git/hook", "touch '\(path("ran-git"))'")
        try script(outside + "/evil", "touch '\(path("ran-evil"))'")
        XCTAssertEqual(symlink(outside + "/evil", tree + "/out"), 0)
        XCTAssertEqual(symlink("../outside", tree + "/up"), 0)
        XCTAssertEqual(symlink("count", tree + "/in"), 0)
        // An ELF program, run through its descriptor as the scripts are.
        XCTAssertEqual(system("cp /bin/cat '\(tree)/cat'"), 0)
    }

    private func script(_ file: String, _ body: String, mode: mode_t = 0o755) throws {
        try ("#!/bin/sh\n" + body + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, mode)
    }

    /// What our client prints from the program at `url` (stdin closed, --no-close). Ours
    /// closes with 1000 when the program exits; websocketd 0.4.1 closes TCP without a Close
    /// (our client's exit 7), so only the output is compared.
    private func output(_ url: String, fromWebsocketd: Bool = false) throws -> String {
        let result = try runWspipe(["--no-close", url], stdin: .null)
        if !fromWebsocketd {
            assertExit(result, 0)
            XCTAssertEqual(result.stderr, "", url)
        }
        return result.stdoutText
    }

    func testEveryRefusedFormIs404BeforeThe101AndRunsNothing() throws {
        let (server, port) = try startListening(["-v", "--dir", tree])
        XCTAssertTrue(server.stderr.text.contains("wspipe: * --dir \(URL(fileURLWithPath: tree).resolvingSymlinksInPath().path): paths resolved with openat2(RESOLVE_BENEATH), symbolic links refused\n"),
                      server.stderr.text)
        let refused: [(String, String)] = [
            ("/../outside/evil", "the path has a . or .. segment"),
            ("/%2e%2e/outside/evil", "the path has a . or .. segment"),
            ("/sub/%2E%2E/count", "the path has a . or .. segment"),
            ("/./count", "the path has a . or .. segment"),
            ("/count%5cx", "the path has a backslash"),
            ("/sub\\deep\\prog", "the path has a backslash"),
            ("/count%00", "the path has a NUL byte"),
            ("/.hidden", "the path names a dotfile or dot-directory '.hidden'"),
            ("/.git/hook", "the path names a dotfile or dot-directory '.git'"),
            ("/%2ehidden", "the path names a dotfile or dot-directory '.hidden'"),
            ("/sub", "it is a directory"),
            ("/sub/deep/", "it is a directory"),
            ("/", "it is a directory"),
            ("/plain.txt", "the file is not executable"),
            ("/out", "a symbolic link is on the path"),
            ("/up/evil", "a symbolic link is on the path"),
            ("/in", "a symbolic link is on the path"),
            ("/missing", "no such file"),
            ("/%252e%252e/outside/evil", "no such file"),
            ("/count%2F..%2Fout", "the path has an encoded / (%2F) in a segment"),
            ("//count", "the path has an empty segment (//)"),
            ("/count%zz", "invalid percent-encoding at byte 6 of the path"),
        ]
        for (target, why) in refused {
            XCTAssertEqual(try upgradeStatus(port, Array(target.utf8)), 404, target)
            let expected = "wspipe: * 404 for \(target): \(why)\n"
            XCTAssertTrue(server.stderr.wait(timeout: 10) { String(decoding: $0, as: UTF8.self).contains(expected) },
                          "no '\(expected)' in \(server.stderr.text)")
        }
        // A raw control byte never gets past the request line.
        XCTAssertEqual(try upgradeStatus(port, Array("/count".utf8) + [0] + Array("x".utf8)), 400)
        server.signal(SIGTERM)
        let ended = finish(server)
        assertDiedOf(ended, SIGTERM)
        XCTAssertFalse(ended.stderr.contains("connected from"), "no client got a 101: \(ended.stderr)")
        for marker in ["ran-plain", "ran-hidden", "ran-git", "ran-evil"] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: path(marker)), "\(marker): a refused program ran")
        }
    }

    /// An absolute-form target (RFC 9112 §3.2.2) names the program its path names, as the
    /// upgrade and --path read it; its path goes through every rule, the authority through none.
    func testAnAbsoluteFormTargetNamesTheProgramOfItsPath() throws {
        let (server, port) = try startListening(["--dir", tree])
        XCTAssertEqual(try upgradeStatus(port, Array("ws://127.0.0.1:\(port)/count".utf8)), 101)
        XCTAssertEqual(try upgradeStatus(port, Array("http://other.example/sub/deep/prog/x?q=1".utf8)), 101)
        for refused in ["ws://h/../outside/evil", "ws://h/.hidden", "ws://h/out", "ws://h//count", "ws://h/plain.txt"] {
            XCTAssertEqual(try upgradeStatus(port, Array(refused.utf8)), 404, refused)
        }
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
        for marker in ["ran-plain", "ran-hidden", "ran-evil"] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: path(marker)), "\(marker): a refused program ran")
        }
    }

    func testValidPathsGiveWebsocketdsVariables() throws {
        let websocketdPath = try Tool.websocketd.path()
        let (server, port) = try startListening(["--dir", tree])
        let theirPort = try LoopbackSocket(listening: false).port
        let websocketd = try ChildProcess(executable: websocketdPath,
                                          arguments: ["--port", "\(theirPort)", "--address", "127.0.0.1", "--dir", tree],
                                          environment: Locations.baseEnvironment, stdin: .null)
        addTeardownBlock { websocketd.kill() }
        XCTAssertTrue(websocketd.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("Starting WebSocket server") },
                      "websocketd did not start: \(websocketd.stdout.text)")
        // It says so just before it listens.
        let deadline = monotonicSeconds() + 10
        while (try? upgradeStatus(theirPort, Array("/count".utf8))) != 101 && monotonicSeconds() < deadline { usleep(20_000) }
        let paths = ["/count", "/count/a%20b/c/", "/sub/deep/prog/x?q=1&r=%41", "/sub/deep/prog", "/sub/deep/prog/"]
        for target in paths {
            let ours = try output("ws://127.0.0.1:\(port)\(target)")
            let theirs = try output("ws://127.0.0.1:\(theirPort)\(target)", fromWebsocketd: true)
            XCTAssertEqual(ours, theirs, target)
            XCTAssertTrue(ours.hasPrefix("S=/"), ours)
        }
        XCTAssertEqual(try output("ws://127.0.0.1:\(port)/sub/deep/prog/x"),
                       "S=/sub/deep/prog P=/x T=/sub/deep/prog/x U=/sub/deep/prog/x Q=\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testAProgramSeesItsFileAndAnElfProgramRunsThroughItsDescriptor() throws {
        try script(tree + "/where", #"echo "$SCRIPT_FILENAME $0""#)
        let (server, port) = try startListening(["--dir", tree])
        let real = URL(fileURLWithPath: tree).resolvingSymlinksInPath().path
        XCTAssertEqual(try output("ws://127.0.0.1:\(port)/where/x"), "\(real)/where /proc/self/fd/3\n")
        let echoed = try runWspipe(["ws://127.0.0.1:\(port)/cat"], stdin: .bytes(Array("one\ntwo\n".utf8)))
        assertExit(echoed, 0)
        assertStdout(echoed, "one\ntwo\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testAProgramThatFailsClosesWith1011() throws {
        let (server, port) = try startListening(["--dir", tree])
        let result = try runWspipe(["--no-close", "ws://127.0.0.1:\(port)/fail"], stdin: .null)
        assertExit(result, 8)
        assertStdout(result, "failing\n")
        XCTAssertTrue(result.stderr.contains("1011") && result.stderr.contains("exit status 3"), result.stderr)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testMaxChildrenRefusesWith503() throws {
        let (server, port) = try startListening(["--dir", tree, "--max-children", "1", "--close-grace", "0.2"])
        let first = try spawnWspipe(["--no-close", "ws://127.0.0.1:\(port)/hold"], stdin: .null)
        XCTAssertNotNil(first.stdout.waitForLine(startingWith: "ready", timeout: 10))
        let second = try runWspipe(["ws://127.0.0.1:\(port)/count"], stdin: .null)
        assertExit(second, 5)
        XCTAssertTrue(second.stderr.contains("503"), second.stderr)
        // A path that names no program is 404 even while the pool is full.
        XCTAssertEqual(try upgradeStatus(port, Array("/missing".utf8)), 404)
        first.kill()
        _ = finish(first)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testADirectoryThatCannotBeOpenedFailsBeforeListening() throws {
        let result = try runWspipe(["-l", "127.0.0.1:0", "--dir", tree + "/count"])
        assertExit(result, 1)
        XCTAssertEqual(result.stderr, "wspipe: cannot serve programs from '\(tree)/count': Not a directory\n")
        let usage = try runWspipe(["-l", "127.0.0.1:0", "--dir", tree, "--exec", "cat"])
        assertExit(usage, 2)
        XCTAssertTrue(usage.stderr.contains("--dir and --exec cannot be combined"), usage.stderr)
    }
}
