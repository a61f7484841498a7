// Serving sockets wspipe did not make (-l systemd, -l fd:N) and sharing a port between
// processes (--reuseport): peers/activate.py passes listening sockets the way systemd does.
import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

final class ServiceListenTests: IntegrationTestCase {
    /// activate.py LAUNCHER -- wspipe ARGUMENTS; killed at the end of the test.
    func activated(_ launcher: [String], _ arguments: [String]) throws -> ChildProcess {
        let child = try ChildProcess(executable: Locations.python,
                                     arguments: ["\(Locations.peers)/activate.py"] + launcher + ["--", Locations.wspipe] + arguments,
                                     environment: Locations.baseEnvironment, stdin: .null)
        addTeardownBlock { child.kill() }
        return child
    }

    /// The `listening on` line and the first TCP port in it.
    func listening(_ child: ChildProcess, file: StaticString = #filePath, line: UInt = #line) throws -> (String, Int) {
        guard let text = child.stderr.waitForLine(startingWith: "wspipe: listening on ", timeout: 15) else {
            XCTFail("no listening line; stderr: \(child.stderr.text)", file: file, line: line)
            throw HarnessError("server did not start")
        }
        let port = text.components(separatedBy: "ws://127.0.0.1:").dropFirst().first.flatMap { Int($0.prefix { $0.isNumber }) } ?? 0
        return (text, port)
    }

    func testSystemdActivationServesThePassedSocket() throws {
        let server = try activated([], ["-l", "systemd", "--echo"])
        let (_, port) = try listening(server)
        XCTAssertGreaterThan(port, 0)
        let result = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("hi\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "hi\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// Each passed socket is served and named; an activated Unix socket's path is its
    /// owner's: still there after we exit (a restarted service gets the same socket).
    func testTCPAndUnixSocketsAreServedAndTheUnixPathIsKept() throws {
        let socketPath = path("activated.sock")
        let server = try activated(["--tcp", "1", "--unix", socketPath], ["-l", "systemd", "--echo"])
        let (line, port) = try listening(server)
        XCTAssertEqual(line, "wspipe: listening on ws://127.0.0.1:\(port)/, ws+unix://\(socketPath)")
        let overUnix = try runWspipe(["ws+unix://\(socketPath):/"], stdin: .bytes(Array("unix\n".utf8)))
        assertStdout(overUnix, "unix\n")
        let overTCP = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("tcp\n".utf8)))
        assertStdout(overTCP, "tcp\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
        XCTAssertTrue(FileManager.default.fileExists(atPath: socketPath), "the activated socket's path was unlinked")
    }

    /// systemd's own launcher (apt systemd), where installed: it binds, waits for the first
    /// connection, then execs wspipe with LISTEN_FDS=1, LISTEN_PID and LISTEN_FDNAMES.
    func testSystemdSocketActivateStartsUsAtTheFirstConnection() throws {
        let launcher = try Tool.systemdSocketActivate.path()
        let port = try LoopbackSocket(listening: false).port
        let server = try ChildProcess(executable: launcher, arguments: ["-l", "127.0.0.1:\(port)", Locations.wspipe, "-l", "systemd", "--echo"],
                                      environment: Locations.baseEnvironment, stdin: .null)
        addTeardownBlock { server.kill() }
        XCTAssertNotNil(server.stderr.waitForLine(startingWith: "Listening on 127.0.0.1:\(port)", timeout: 15), server.stderr.text)
        let result = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("activated\n".utf8)))
        assertStdout(result, "activated\n")
        XCTAssertTrue(server.stderr.text.contains("wspipe: listening on ws://127.0.0.1:\(port)/"), server.stderr.text)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testAForeignListenPIDIsAUsageErrorSayingWhatWasFound() throws {
        let result = finish(try activated(["--pid", "parent"], ["-l", "systemd", "--echo"]))
        assertExit(result, 2)
        XCTAssertNotNil(result.stderr.range(of: #"wspipe: -l systemd: LISTEN_PID=\d+ is not this process \(\d+\)"#, options: .regularExpression),
                        result.stderr)
        let missing = try runWspipe(["-l", "systemd", "--echo"])
        assertExit(missing, 2)
        assertStderr(missing, contains: "LISTEN_PID is not set")
    }

    func testAConnectedSocketIsRefusedNamingTheDescriptor() throws {
        let result = finish(try activated(["--connected"], ["-l", "systemd", "--echo"]))
        assertExit(result, 2)
        assertStderr(result, contains: "wspipe: -l systemd: fd 3 is a connected socket, not a listening one (a systemd unit with Accept=yes?")
        let notASocket = try runWspipe(["-l", "fd:3", "--echo"])
        assertExit(notASocket, 2)
        assertStderr(notASocket, contains: "wspipe: -l fd:3: fd 3 is not a socket")
    }

    func testFdThreeFromAnyParent() throws {
        let server = try activated(["--pid", "none"], ["-l", "fd:3", "--echo"])
        let (_, port) = try listening(server)
        let result = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("fd\n".utf8)))
        assertStdout(result, "fd\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// The program of each connection inherits neither the variables (asked for with
    /// --passenv, so only their removal keeps them out) nor the listening descriptor.
    func testExecChildrenSeeNoListenVariablesAndNoListeningSocket() throws {
        let program = #"for f in /proc/$$/fd/*; do echo "fd ${f##*/} $(readlink "$f")"; done; env | grep '^LISTEN_' || echo no-listen-env"#
        let server = try activated([], ["-l", "systemd", "--passenv", "LISTEN_PID", "--passenv", "LISTEN_FDS",
                                        "--passenv", "LISTEN_FDNAMES", "--sh", program])
        let (_, port) = try listening(server)
        let result = try runWspipe(["--no-close", "ws://127.0.0.1:\(port)/"], stdin: .null)
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        // Its stdin, stdout and stderr are pipes (and $(readlink) makes one): any socket is ours.
        XCTAssertTrue(lines.contains { $0.hasPrefix("fd 0 pipe:") }, "\(result)")
        XCTAssertFalse(lines.contains { $0.contains("socket:") }, "a socket reached the child: \(result)")
        XCTAssertEqual(lines.last, "no-listen-env", "\(result)")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// Two processes on one port, both with SO_REUSEPORT: the kernel spreads 40
    /// connections (from 40 source addresses) over both.
    func testTwoReuseportProcessesBothReceiveConnections() throws {
        let (first, port) = try startListening(["--reuseport", "--echo", "-v"])
        let second = try spawnWspipe(["-l", "127.0.0.1:\(port)", "--reuseport", "--echo", "-v"], stdin: .null)
        XCTAssertNotNil(second.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:\(port)/", timeout: 15),
                        second.stderr.text)
        let clients = try ChildProcess(executable: Locations.python,
                                       arguments: ["\(Locations.peers)/server_client.py", "hold", "ws://127.0.0.1:\(port)/", "40"],
                                       environment: Locations.baseEnvironment, stdin: .null)
        addTeardownBlock { clients.kill() }
        XCTAssertNotNil(clients.stdout.waitForLine(startingWith: "open 40", timeout: 15), clients.stdout.text)
        first.signal(SIGTERM)
        second.signal(SIGTERM)
        let one = finish(first), other = finish(second)
        let served = [one, other].map { $0.stderr.components(separatedBy: " connected from ").count - 1 }
        XCTAssertEqual(served.reduce(0, +), 40, "\(one)\n\(other)")
        XCTAssertTrue(served.allSatisfy { $0 > 0 }, "one process got every connection: \(served)")
        _ = clients.wait(timeout: 10)
    }

    func testReuseportIsForTCPListeners() throws {
        for listen in ["unix:\(path("x.sock"))", "fd:3", "systemd"] {
            let result = try runWspipe(["-l", listen, "--reuseport", "--echo"])
            assertExit(result, 2)
            assertStderr(result, contains: "wspipe: --reuseport is for TCP listeners: ")
        }
    }

    /// The example units are valid where systemd-analyze is installed.
    func testTheExampleUnitsVerify() throws {
        let analyze = try Tool.systemdAnalyze.path()
        // verify checks that ExecStart's program exists: the copies name the built binary.
        let directory = Locations.packageRoot + "/examples/systemd"
        var units: [String] = []
        for name in ["wspipe.socket", "wspipe.service"] {
            let text = try String(contentsOfFile: directory + "/" + name, encoding: .utf8)
            units.append(path(name))
            try text.replacingOccurrences(of: "/usr/local/bin/wspipe", with: Locations.wspipe)
                .write(toFile: path(name), atomically: true, encoding: .utf8)
        }
        let child = try ChildProcess(executable: analyze, arguments: ["verify", "--man=no"] + units,
                                     environment: Locations.baseEnvironment, stdin: .null)
        let result = child.wait(timeout: 30)
        XCTAssertEqual(result.termination, .exited(0), "\(result)")
        XCTAssertFalse(result.stderr.contains("Unknown") || result.stderr.contains("Failed"), result.stderr)
    }
}
