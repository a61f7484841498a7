// Every server sender sends a message that is whole at hand as one final frame: a 5-byte
// echo is `81 05 hello`, not `01 05 hello 80 00` (the echo sent each piece as a fragment
// and ended with an empty continuation: twice the frames, and clients with weak
// fragmentation support paid for it). --broadcast and --exec were already whole.
import Glibc
import TestSupport
import XCTest

final class OneFramePerMessageTests: IntegrationTestCase {
    private let hello: [UInt8] = [0x81, 0x05] + Array("hello".utf8)

    /// Reads until `count` bytes came or 5 s passed, then whatever else arrives within 0.3 s.
    private func read(_ fd: Int32, atLeast count: Int) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = monotonicSeconds() + 5
        while monotonicSeconds() < deadline {
            let wanted = received.count >= count
            var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pollFD, 1, wanted ? 300 : 100) > 0 else {
                if wanted { break } else { continue }
            }
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else { break }
            received += buffer[..<n]
        }
        return received
    }

    /// A masked text frame of `payload` from a client.
    private func sendText(_ fd: Int32, _ payload: [UInt8]) {
        let key: [UInt8] = [1, 2, 3, 4]
        let frame = [0x81, 0x80 | UInt8(payload.count)] + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
        _ = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func testEchoOfAFiveByteMessageIsOneFrame() throws {
        let (_, port) = try startListening(["--echo"])
        let fd = try stalledClient(port)
        defer { close(fd) }
        sendText(fd, Array("hello".utf8))
        XCTAssertEqual(read(fd, atLeast: hello.count), hello)
    }

    func testBroadcastSendsAStdinLineAsOneFrame() throws {
        let server = try spawnWspipe(["-l", "0", "--broadcast"], stdin: .pipe)
        guard let line = server.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let port = Int(line.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            throw HarnessError("no listening line: \(server.stderr.text)")
        }
        let fd = try stalledClient(port)
        defer { close(fd) }
        // The client counts once the server has seen it: give the accept a moment.
        usleep(300_000)
        server.writeStdin("hello\n")
        XCTAssertEqual(read(fd, atLeast: hello.count), hello)
    }

    func testExecSendsAProgramsLineAsOneFrame() throws {
        let (_, port) = try startListening(["--sh", "echo hello; sleep 5"])
        let fd = try stalledClient(port)
        defer { close(fd) }
        XCTAssertEqual(read(fd, atLeast: hello.count), hello)
    }
}
