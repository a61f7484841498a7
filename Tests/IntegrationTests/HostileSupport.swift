// Helpers for the hostile-peer, local-input, no-data-loss and secrets suites (kept out of
// Harness.swift): the hostile.py peer and its records, memory measurement, stdin fed by a
// generator thread, stdout held by the test (a reader that stalls, then drains), wspipe
// run with a standard descriptor closed, and the byte patterns the peer checks.
import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

// MARK: - hostile.py

/// What hostile.py wrote about one connection (see the script's docstring).
struct HostileRecord: Decodable, HeaderRecord {
    let path: String?
    let headers: [[String]]
    let messages: Int
    let bytes: Int
    let types: [String: Int]
    let frames: Int
    let max_frame: Int
    let sizes: [Int]
    let close: ConnectionRecord.Close?
    /// Seconds from the 101 (huge-stream: from the huge header) to the client's Close.
    let close_at: Double?
    let messages_before_close: Int?
    let errors: [String]
    let pings: Int
    let pongs: Int
    let last_pong: String?
    let sent: Int
    let sent_bytes: Int
    let flood_seconds: Double?
    let pongs_before_close: Int?
    /// deaf-ping-flood: pongs received after the first ping left unanswered.
    let pongs_after_gap: Int?
}

/// The bytes hostile.py's `--check pattern` expects (and `flood` sends after each index):
/// 251 bytes, i * 37 + 11.
enum Pattern {
    static let binary: [UInt8] = (0..<251).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
    /// 61 printable ASCII characters, for text payloads.
    static let text: [UInt8] = (0..<61).map { UInt8(0x30 + ($0 * 7) % 61) }

    /// `count` bytes of `pattern` repeated, starting at stream offset `offset`.
    static func bytes(_ pattern: [UInt8], offset: Int, count: Int) -> [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(count)
        var position = offset % pattern.count
        while result.count < count {
            let take = min(pattern.count - position, count - result.count)
            result += pattern[position..<(position + take)]
            position = 0
        }
        return result
    }

    /// send-close's message i (0-based), as hostile.py's message(i).
    static func sendCloseMessage(_ i: Int) -> [UInt8] {
        Array("m\(i):".utf8) + [UInt8](repeating: UInt8(0x61 + i % 26), count: (i * 7919) % 9000)
    }
}

extension IntegrationTestCase {
    /// Samples a running child's VmHWM (peak RSS) every 5 ms until it exits; `peak()` is
    /// the largest value seen. Use this, not RunResult.maxRSSKiB: wait4's ru_maxrss of a
    /// child also counts the test runner's own RSS at spawn time (fork copies the parent's
    /// page tables, and exec keeps the larger high-water mark), so it never reads below the
    /// runner's size (~30 MiB and more).
    func sampleRSS(_ child: ChildProcess) -> () -> Int {
        let peak = Peak()
        let thread = Thread {
            while let value = peakRSSKiB(of: child.pid) {
                peak.note(value)
                usleep(5_000)
            }
        }
        thread.start()
        return { peak.value }
    }

    /// hostile.py with a scenario (see the script).
    func startHostile(_ scenario: String, _ arguments: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        let record = path("hostile-\(UUID().uuidString).json")
        return try startPython("hostile.py", ["--scenario", scenario, "--record", record] + arguments,
                               recordFile: record, file: file, line: line)
    }

    /// Waits until hostile.py reports (PROGRESS lines) at least `bytes` payload bytes received.
    func waitForProgress(_ peer: Peer, atLeast bytes: Int, timeout: Double) -> Bool {
        peer.process.stdout.wait(timeout: timeout) { data in
            String(decoding: data, as: UTF8.self).split(separator: "\n").contains { line in
                line.hasPrefix("PROGRESS ") && (Int(line.dropFirst(9)) ?? 0) >= bytes
            }
        }
    }
}

extension Peer {
    /// hostile.py's record of the `n`th connection.
    func hostileRecord(_ n: Int = 1, timeout: Double = 15) throws -> HostileRecord {
        try record(n, as: HostileRecord.self, timeout: timeout)
    }
}

// MARK: - Memory

/// The peak resident set size (VmHWM) of a running process, KiB; nil once it is gone.
func peakRSSKiB(of pid: pid_t) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
    return nil
}

func mebibytes(_ kib: Int) -> String { String(format: "%.1f MiB", Double(kib) / 1024) }

/// The resident set size (VmRSS) of a running process, KiB.
func residentKiB(of pid: pid_t) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
    return try XCTUnwrap(Int(line.split(separator: " ").dropFirst().first ?? ""))
}

/// utime + stime of a process, in seconds.
func cpuSeconds(_ pid: pid_t) throws -> Double {
    let text = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    let fields = text[text.index(after: try XCTUnwrap(text.lastIndex(of: ")")))...].split(separator: " ")
    // Fields 14 and 15 of stat(5), counted after the command's closing parenthesis.
    return Double((Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

// MARK: - Descriptors the test holds

/// A pipe whose ends are close-on-exec in this process. A child gets an end through
/// `/proc/self/fd/N`, which posix_spawn opens in the child before exec (the descriptor
/// is still there then; close-on-exec drops the original at exec).
final class TestPipe {
    private(set) var readFD: Int32
    private(set) var writeFD: Int32

    init() throws {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw HarnessError("pipe: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        readFD = fds[0]
        writeFD = fds[1]
    }

    var readPath: String { "/proc/self/fd/\(readFD)" }
    var writePath: String { "/proc/self/fd/\(writeFD)" }

    func closeRead() {
        if readFD >= 0 { close(readFD) }
        readFD = -1
    }

    func closeWrite() {
        if writeFD >= 0 { close(writeFD) }
        writeFD = -1
    }

    deinit {
        closeRead()
        closeWrite()
    }
}

/// Feeds a child's stdin from a thread: `produce` is called again and again and returns the
/// next chunk, or nil at the end (then the pipe is closed: EOF). Nothing is held in memory
/// beyond one chunk. Stops when the child stops reading (EPIPE) or on `stop()`.
final class GeneratedInput: @unchecked Sendable {
    private let pipe: TestPipe
    private let lock = NSLock()
    private var stopped = false
    private var written = 0
    private let done = DispatchSemaphore(value: 0)

    init() throws { pipe = try TestPipe() }

    /// Give this to the child: `stdin: .file(input.childPath)`; then call `start`.
    var childPath: String { pipe.readPath }

    var bytesWritten: Int { lock.withLock { written } }

    func start(_ produce: @escaping @Sendable () -> [UInt8]?) {
        pipe.closeRead()    // the child has its own open description now
        let fd = pipe.writeFD
        let thread = Thread { [self] in
            defer {
                pipe.closeWrite()
                done.signal()
            }
            while let chunk = produce() {
                if lock.withLock({ stopped }) { return }
                var offset = 0
                while offset < chunk.count {
                    let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { return }
                    offset += n
                    lock.withLock { written += n }
                }
            }
        }
        thread.name = "generated stdin"
        thread.start()
    }

    /// Asks the thread to stop after its current write.
    func stop() { lock.withLock { stopped = true } }

    /// Waits for the thread to end (EOF written, EPIPE or stop).
    @discardableResult
    func wait(timeout: Double) -> Bool { done.wait(timeout: .now() + timeout) == .success }
}

/// A stdout pipe that the test holds and does not read until `startDraining`: wspipe sees
/// a reader that stalls. The drained bytes are counted, and kept if asked; `inspect` sees
/// every chunk read with its stream offset.
final class HeldStdout: @unchecked Sendable {
    private let pipe: TestPipe
    private let condition = NSCondition()
    private var count = 0
    private var kept: [UInt8] = []
    private var finished = false

    init() throws { pipe = try TestPipe() }

    /// Give this to the child: `stdoutFile: held.childPath`.
    var childPath: String { pipe.writePath }

    /// Call once the child is spawned (so only the child holds the write end).
    func childStarted() { pipe.closeWrite() }

    /// Starts reading (on a thread) until EOF; with `pause`, sleeps that many seconds after
    /// every read (a slow reader: a pipe read returns at most 64 KiB).
    func startDraining(keep: Bool = false, pause: Double = 0,
                       inspect: (@Sendable (_ offset: Int, _ chunk: UnsafeRawBufferPointer) -> Void)? = nil) {
        let fd = pipe.readFD
        let thread = Thread { [self] in
            let size = 1 << 20
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            defer { buffer.deallocate() }
            while true {
                let n = read(fd, buffer, size)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                let chunk = UnsafeRawBufferPointer(start: buffer, count: n)
                inspect?(count, chunk)
                condition.lock()
                if keep { kept += chunk }
                count += n
                condition.unlock()
                if pause > 0 { usleep(UInt32(pause * 1e6)) }
            }
            condition.lock()
            finished = true
            condition.broadcast()
            condition.unlock()
        }
        thread.name = "held stdout"
        thread.start()
    }

    /// Waits for EOF (true) or the timeout.
    func waitForEnd(timeout: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !finished {
            if !condition.wait(until: deadline) { return finished }
        }
        return true
    }

    var byteCount: Int { condition.withLock { count } }
    var bytes: [UInt8] { condition.withLock { kept } }
}

// MARK: - wspipe with a standard descriptor closed

/// Test cases that spawn children outside `spawnWspipe` (through /bin/sh) and clean up.
class HostileTestCase: IntegrationTestCase {
    private var ownCleanups: [() -> Void] = []

    override func tearDown() {
        for cleanup in ownCleanups.reversed() { cleanup() }
        ownCleanups = []
        super.tearDown()
    }

    func addCleanup(_ cleanup: @escaping () -> Void) { ownCleanups.append(cleanup) }

    /// Runs wspipe through `sh -c 'exec wspipe ARGS REDIRECTIONS'`: the same process (exec),
    /// with `redirections` such as `<&-` or `>&-` applied first.
    func spawnWspipe(redirections: String, _ arguments: [String], stdin: StandardInput = .null,
                     environment: [String: String] = [:]) throws -> ChildProcess {
        let child = try ChildProcess(executable: "/bin/sh",
                                     arguments: ["-c", "exec \"$0\" \"$@\" \(redirections)", Locations.wspipe] + arguments,
                                     environment: Locations.baseEnvironment.merging(environment) { $1 }, stdin: stdin)
        addCleanup { child.kill() }
        return child
    }

    /// Runs a helper (an executable, not wspipe) and registers its cleanup.
    func spawnHelper(_ executable: String, _ arguments: [String], stdin: StandardInput = .null) throws -> ChildProcess {
        let child = try ChildProcess(executable: executable, arguments: arguments,
                                     environment: Locations.baseEnvironment.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 },
                                     stdin: stdin)
        addCleanup { child.kill() }
        return child
    }
}

final class Peak: @unchecked Sendable {
    private let lock = NSLock()
    private var largest = 0
    func note(_ value: Int) { lock.withLock { largest = max(largest, value) } }
    var value: Int { lock.withLock { largest } }
}
