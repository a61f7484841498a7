// A small process runner for the tests: posix_spawn with pipes we control
// (every descriptor we create is close-on-exec, so a child never holds another child's pipe
// open), output collected by reader threads, a hard timeout that kills, and signals.
// Foundation's Process is not used: it reaps children on its own and gives less control
// over the signal state the child starts with.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a child reads on its stdin.
package enum StandardInput {
    /// /dev/null.
    case null
    /// These bytes (written by a thread, so a child that answers before it has read
    /// everything cannot deadlock us), then EOF.
    case bytes([UInt8])
    /// A pipe the test keeps: `ChildProcess.writeStdin` and `closeStdin`.
    case pipe
    /// This file (or directory), opened read-only.
    case file(String)
    /// One end of a Unix stream socketpair, the other kept as `.pipe`'s write end is
    /// (`writeStdin`; `closeStdin` closes it: the child reads its end).
    case socket
}

/// How a child ended.
package enum Termination: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)
    /// It outlived its timeout and was killed (SIGKILL).
    case timedOut

    package var description: String {
        switch self {
        case .exited(let code): return "exit status \(code)"
        case .signaled(let number): return "killed by signal \(number)"
        case .timedOut: return "timed out (killed)"
        }
    }
}

/// Everything a finished run left behind.
package struct RunResult: CustomStringConvertible {
    package let termination: Termination
    package let stdout: [UInt8]
    package let stderr: String
    /// Seconds from spawn to exit.
    package let elapsed: Double
    /// Peak resident set size of the child, KiB (wait4's ru_maxrss).
    package let maxRSSKiB: Int

    package var exitCode: Int32? {
        if case .exited(let code) = termination { return code }
        return nil
    }

    package var stdoutText: String { String(decoding: stdout, as: UTF8.self) }

    package var description: String {
        let shownOut = stdout.count > 2000 ? "\(String(decoding: stdout.prefix(2000), as: UTF8.self))... (\(stdout.count) bytes)"
                                           : String(reflecting: stdoutText)
        return "\(termination) after \(String(format: "%.2f", elapsed)) s\n--- stdout: \(shownOut)\n--- stderr:\n\(stderr)"
    }
}

/// Reads one descriptor to EOF on its own thread and keeps what it read.
package final class OutputCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var data: [UInt8] = []
    private var finished = false
    private let fd: Int32
    private let closeAfterFirstLine: Bool

    /// - Parameter closeAfterFirstLine: behave like `head -n1`: close the descriptor as
    ///   soon as a newline has been read (the writer then gets EPIPE).
    package init(fd: Int32, closeAfterFirstLine: Bool = false) {
        self.fd = fd
        self.closeAfterFirstLine = closeAfterFirstLine
        let thread = Thread { [self] in run() }
        thread.name = "collector fd \(fd)"
        thread.start()
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            condition.lock()
            if n > 0 { data += buffer[0..<n] }
            let stop = n <= 0 || (closeAfterFirstLine && data.contains(0x0A))
            if stop { finished = true }
            condition.broadcast()
            condition.unlock()
            if stop { break }
        }
        close(fd)
    }

    package var bytes: [UInt8] {
        condition.lock()
        defer { condition.unlock() }
        return data
    }

    package var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Waits until `predicate` holds for the bytes read so far (true), or until EOF or the
    /// timeout without it holding (false).
    package func wait(timeout: Double, until predicate: ([UInt8]) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if predicate(data) { return true }
            if finished { return false }
            if !condition.wait(until: deadline) { return predicate(data) }
        }
    }

    /// Waits for EOF (true) or the timeout (false).
    package func waitForEnd(timeout: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !finished {
            if !condition.wait(until: deadline) { return finished }
        }
        return true
    }

    /// Waits for a complete line starting with `prefix`; returns it without the newline.
    package func waitForLine(startingWith prefix: String, timeout: Double) -> String? {
        var found: String?
        _ = wait(timeout: timeout) { bytes in
            let text = String(decoding: bytes, as: UTF8.self)
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            lines.removeLast() // the part after the last newline is not a complete line
            found = lines.last { $0.hasPrefix(prefix) }.map(String.init)
            return found != nil
        }
        return found
    }
}

package func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// A spawned child process.
package final class ChildProcess: @unchecked Sendable {
    package let pid: pid_t
    package let name: String
    package let stdout: OutputCollector
    package let stderr: OutputCollector
    private let lock = NSLock()
    private var stdinFD: Int32 = -1
    private var result: (Termination, Int)?
    private let started: Double

    package struct SpawnError: Error, CustomStringConvertible {
        package let description: String
    }

    /// Spawns `executable` (an absolute path) with exactly `environment` as its environment,
    /// in a process group of its own, with default signal dispositions and no blocked signals.
    /// - Parameters:
    ///   - stdoutFile: connect stdout to this file (opened write-only, e.g. /dev/full)
    ///     instead of collecting it.
    ///   - closeStdoutAfterFirstLine: read stdout like `head -n1`.
    package init(executable: String, arguments: [String], environment: [String: String],
         stdin: StandardInput = .null, stdoutFile: String? = nil, closeStdoutAfterFirstLine: Bool = false) throws {
        name = (executable as NSString).lastPathComponent
        func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            // pipe2 is not imported (_GNU_SOURCE); children are only spawned from the test
            // thread, so setting the flag right after pipe() leaves no window for a leak.
            guard pipe(&fds) == 0 else { throw SpawnError(description: "pipe: \(String(cString: strerror(errno)))") }
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return (fds[0], fds[1])
        }
        func makeSocketPair() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else {
                throw SpawnError(description: "socketpair: \(String(cString: strerror(errno)))")
            }
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return (fds[0], fds[1])
        }
        let out = try makePipe()
        let err = try makePipe()
        var input: (read: Int32, write: Int32)?
        switch stdin {
        case .null, .file: break
        case .bytes, .pipe: input = try makePipe()
        case .socket: input = try makeSocketPair()
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input.read, 0)
        } else if case .file(let path) = stdin {
            posix_spawn_file_actions_addopen(&actions, 0, path, O_RDONLY, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if let stdoutFile {
            // The stdout pipe is still made; nobody writes it, so its collector sees EOF.
            posix_spawn_file_actions_addopen(&actions, 1, stdoutFile, O_WRONLY, 0)
        } else {
            posix_spawn_file_actions_adddup2(&actions, out.write, 1)
        }
        posix_spawn_file_actions_adddup2(&actions, err.write, 2)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        close(out.write)
        close(err.write)
        if let input { close(input.read) }
        guard status == 0 else {
            close(out.read)
            close(err.read)
            if let input { close(input.write) }
            throw SpawnError(description: "cannot run \(executable): \(String(cString: strerror(status)))")
        }
        pid = child
        started = monotonicSeconds()
        self.stdout = OutputCollector(fd: out.read, closeAfterFirstLine: closeStdoutAfterFirstLine)
        self.stderr = OutputCollector(fd: err.read)
        if let input {
            stdinFD = input.write
            if case .bytes(let bytes) = stdin {
                let thread = Thread { [self] in
                    writeStdin(bytes)
                    closeStdin()
                }
                thread.name = "stdin writer"
                thread.start()
            }
        }
    }

    /// Writes to the child's stdin pipe; false if it is closed or the child stopped reading.
    @discardableResult
    package func writeStdin(_ bytes: [UInt8]) -> Bool {
        lock.lock()
        let fd = stdinFD
        lock.unlock()
        guard fd >= 0 else { return false }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    package func writeStdin(_ text: String) { writeStdin(Array(text.utf8)) }

    package func closeStdin() {
        lock.lock()
        let fd = stdinFD
        stdinFD = -1
        lock.unlock()
        if fd >= 0 { close(fd) }
    }

    package func signal(_ number: Int32) {
        lock.lock()
        defer { lock.unlock() }
        if result == nil { Glibc.kill(pid, number) }
    }

    /// Reaps the child if it has ended (or waits for it). Call with the lock held.
    private func reap(blocking: Bool) -> Bool {
        if result != nil { return true }
        var status: Int32 = 0
        var usage = rusage()
        while true {
            let r = wait4(pid, &status, blocking ? 0 : WNOHANG, &usage)
            if r == pid { break }
            if r < 0 && errno == EINTR { continue }
            return false
        }
        let termination: Termination = status & 0x7F == 0 ? .exited((status >> 8) & 0xFF) : .signaled(status & 0x7F)
        result = (termination, usage.ru_maxrss)
        return true
    }

    /// Waits for the child to exit, at most `timeout` seconds; then kills it (SIGKILL to
    /// its process group) and reports `.timedOut`. Output is collected until EOF (a few
    /// seconds at most after the exit).
    package func wait(timeout: Double) -> RunResult {
        let deadline = monotonicSeconds() + timeout
        var timedOut = false
        while true {
            lock.lock()
            let done = reap(blocking: false)
            lock.unlock()
            if done { break }
            if monotonicSeconds() >= deadline {
                timedOut = true
                Glibc.kill(-pid, SIGKILL)
                Glibc.kill(pid, SIGKILL)
                lock.lock()
                _ = reap(blocking: true)
                lock.unlock()
                break
            }
            usleep(2000)
        }
        let elapsed = monotonicSeconds() - started
        closeStdin()
        _ = stdout.waitForEnd(timeout: 5)
        _ = stderr.waitForEnd(timeout: 5)
        lock.lock()
        let (termination, rss) = result!
        lock.unlock()
        return RunResult(termination: timedOut ? .timedOut : termination, stdout: stdout.bytes, stderr: stderr.text,
                         elapsed: elapsed, maxRSSKiB: rss)
    }

    /// Kills the child and its process group if still running, and reaps it.
    package func kill() {
        lock.lock()
        defer { lock.unlock() }
        guard result == nil else { return }
        Glibc.kill(-pid, SIGKILL)
        Glibc.kill(pid, SIGKILL)
        _ = reap(blocking: true)
    }
}
