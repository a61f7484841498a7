import CWSPipeShims
import Glibc
import WebSocketEngine
import WebSocketTransport

/// Our end of one of a child's standard pipes: non-blocking, close-on-exec, watched by the
/// loop while its owner wants to read (stdout) or write (stdin).
public final class ChildPipe {
    public let loop: EventLoop
    public private(set) var fd: Int32
    private var watch: EventLoop.Watch?
    /// Called when the pipe is ready for what `wait(_:)` asked.
    public var onReady: () -> Void = {}

    init(loop: EventLoop, fd: Int32) {
        self.loop = loop
        self.fd = fd
        watch = loop.watch(fd) { [weak self] _ in self?.onReady() }
    }

    deinit { close() }

    public var isOpen: Bool { fd >= 0 }

    /// Waits (or stops waiting, with `[]`) for readiness.
    public func wait(_ interest: IOEvents) {
        guard let watch else { return }
        loop.setInterest(watch, interest)
    }

    /// One read(2): `.endOfStream` at EOF, `.wouldBlock(.read)` when empty.
    public func read(into buffer: UnsafeMutableRawPointer, count: Int) -> IOResult {
        guard fd >= 0 else { return .endOfStream }
        while true {
            let n = Glibc.read(fd, buffer, count)
            if n > 0 { return .done(n) }
            if n == 0 { return .endOfStream }
            if errno == EINTR { continue }
            if errno == EAGAIN { return .wouldBlock(.read) }
            return .failed(.system(errno: errno))
        }
    }

    /// One writev(2) of `count` iovecs; `.failed(EPIPE)` once the child closed its end.
    public func write(_ vectors: UnsafePointer<iovec>, count: Int) -> IOResult {
        guard fd >= 0 else { return .failed(.system(errno: EPIPE)) }
        while true {
            let n = wsp_writev_nosigpipe(fd, vectors, Int32(count))
            if n >= 0 { return .done(n) }
            if errno == EINTR { continue }
            if errno == EAGAIN { return .wouldBlock(.write) }
            return .failed(.system(errno: errno))
        }
    }

    /// Stops watching and closes our end (idempotent).
    public func close() {
        if let watch { loop.remove(watch) }
        watch = nil
        onReady = {}
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}

/// Settings of a child's lifecycle.
public struct ChildOptions: Sendable {
    /// Seconds between the end of the connection (the child's stdin is closed then) and
    /// SIGTERM to the child's process group; also how long, after the child exits, what is
    /// left of its group may keep its output open.
    public var closeGrace: Double = 1
    /// Seconds between SIGTERM and SIGKILL to the group. Below 1, so nothing of the group
    /// outlives `closeGrace` + 1 s.
    public var killDelay: Double = 0.5
    /// Longest stderr line handed to the sink, in bytes; longer lines come in pieces.
    public var stderrLineLimit = 4096

    public init() {}
}

/// A program run for one connection: `posix_spawn` in a new process group, its stdin and
/// stdout as non-blocking pipes for the owner (`stdin`, `stdout`), its stderr read here and
/// handed to a sink line by line, a clean environment the caller builds
/// (`CGIEnvironment`).
///
/// **Reaping** needs no SIGCHLD handler (which another part of a program could replace):
/// the exit is seen through a pidfd (pidfd_open, Linux 5.3+) the loop watches, or, on older
/// kernels, by polling waitid(WNOHANG) every 50 ms. The exit is first looked at without
/// reaping (WNOWAIT): the zombie keeps the process-group id from being reused while the
/// rest of the group is signalled, and is reaped last.
///
/// **Ending** (`endGroup()`, when the connection goes; also after the child exits): our
/// end of its stdin is closed; `closeGrace` later SIGTERM goes to the whole process group,
/// `killDelay` after that SIGKILL. Once the child has exited and its stdout and stderr are
/// closed (every process that held them is gone), whatever is left of the group (processes
/// that closed their output) gets SIGKILL and the child is reaped: no zombie, no
/// descriptor, no grandchild left. Every descriptor made here is close-on-exec, and the
/// child is spawned with only 0, 1 and 2 open.
public final class ChildProcess {
    public let loop: EventLoop
    /// The child's pid (and process group); 0 while a `ChildSpawner` is still spawning it.
    public private(set) var pid: pid_t = 0
    public let options: ChildOptions
    /// Our end of the child's stdin (write); nil once closed.
    public private(set) var stdin: ChildPipe?
    /// Our end of the child's stdout (read); the owner reads it and calls `stdoutClosed()` at
    /// its end.
    public private(set) var stdout: ChildPipe?
    private var stderr: ChildPipe?
    private var stderrLine: [UInt8] = []
    private let stderrSink: ([UInt8]) -> Void
    private let pool: ChildPool
    private var pidfd: Int32 = -1
    private var exitWatch: EventLoop.Watch?
    private var pollTimer: EventLoop.Timer?
    private var signalTimer: EventLoop.Timer?
    private var termSent = false
    private var killSent = false
    /// Kept while the child runs: a spawned child is reaped whether or not its owner lives.
    private var running: ChildProcess?

    /// How the child ended, once it has (before it is reaped).
    public private(set) var termination: ChildTermination?
    /// Whether the child has been reaped and nothing of it is left.
    public private(set) var isFinished = false
    /// When the child exits (its output may still be coming).
    public var onExit: (ChildTermination) -> Void = { _ in }
    /// When the child has been reaped and its group is gone.
    public var onFinish: (ChildTermination) -> Void = { _ in }
    /// When a `ChildSpawner` could not start the program (`.cannotSpawn`, or
    /// `.missingProgram` for ENOENT/EACCES); `onFinish` follows with exit status 127.
    public var onSpawnFailure: (ChildError) -> Void = { _ in }

    /// Starts `command` (resolved with `executablePath` against `environment`'s `PATH`).
    ///
    /// - Parameters:
    ///   - environment: the child's whole environment, `NAME=value` entries.
    ///   - pool: counts the child until it is reaped; full: throws `.tooManyChildren`.
    ///   - spawner: when given, posix_spawn runs on its threads and `pid` is set later, on
    ///     the loop's thread (a failure then comes through `onSpawnFailure`); the pipes
    ///     exist at once, so what is written to `stdin` meanwhile waits in the pipe.
    ///   - stderr: gets each line the child writes to stderr (without its `\n`).
    ///   - executable: a descriptor of the program (`--dir`'s, opened beneath its directory),
    ///     run through /proc/self/fd instead of looking `command.program` up (which is then
    ///     only argv[0]); this init closes it in every case.
    /// - Throws: `ChildError`: `.tooManyChildren`, `.missingProgram`, `.cannotSpawn`
    ///   (posix_spawn's errno), `.cannotCreate` (pipes).
    public init(_ command: ChildCommand, environment: [String], loop: EventLoop, pool: ChildPool,
                options: ChildOptions = .init(), spawner: ChildSpawner? = nil, executable: Int32 = -1,
                stderr: @escaping ([UInt8]) -> Void) throws(ChildError) {
        let path: String
        do throws(ChildError) {
            path = executable >= 0 ? command.program
                                   : try command.executablePath(searchPath: ChildProcess.value(of: "PATH", in: environment))
            try pool.take()
        } catch {
            if executable >= 0 { Glibc.close(executable) }
            throw error
        }
        var input: [Int32] = [-1, -1], output: [Int32] = [-1, -1], errors: [Int32] = [-1, -1]
        func closeAll() { for fd in input + output + errors where fd >= 0 { Glibc.close(fd) } }
        guard wsp_child_pipe(&input, 1) == 0, wsp_child_pipe(&output, 0) == 0, wsp_child_pipe(&errors, 0) == 0 else {
            let code = errno
            closeAll()
            if executable >= 0 { Glibc.close(executable) }
            pool.giveBack()
            throw .cannotCreate(what: "a pipe", errno: code)
        }
        self.loop = loop
        self.options = options
        self.pool = pool
        self.stderrSink = stderr
        if let spawner {
            // The spawner closes the child's ends once it has spawned (or failed).
            let queued = spawner.spawn(path, arguments: [command.program] + command.arguments, environment: environment,
                                       input: input[0], output: output[1], errors: errors[1],
                                       executable: executable) { [self] pid, error in
                spawned(pid: pid, error: error, path: path)
            }
            guard queued == 0 else {
                closeAll()
                if executable >= 0 { Glibc.close(executable) }
                pool.giveBack()
                throw .cannotSpawn(path: path, errno: queued)
            }
            openPipes(input: input[1], output: output[0], errors: errors[0])
            return
        }
        var child: pid_t = 0
        let result = ChildProcess.withCStrings([command.program] + command.arguments) { argv in
            ChildProcess.withCStrings(environment) { envp in
                wsp_spawn(path, argv, envp, input[0], output[1], errors[1], executable, &child)
            }
        }
        // The child's ends are its own now (or nobody's).
        Glibc.close(input[0]); Glibc.close(output[1]); Glibc.close(errors[1])
        if executable >= 0 { Glibc.close(executable) }
        guard result == 0 else {
            Glibc.close(input[1]); Glibc.close(output[0]); Glibc.close(errors[0])
            pool.giveBack()
            throw result == ENOENT || result == EACCES ? .missingProgram(path: path, errno: result)
                                                      : .cannotSpawn(path: path, errno: result)
        }
        self.pid = child
        openPipes(input: input[1], output: output[0], errors: errors[0])
        watchExit()
    }

    /// Our ends of the pipes, watched; the child is kept until it is reaped.
    private func openPipes(input: Int32, output: Int32, errors: Int32) {
        stdin = ChildPipe(loop: loop, fd: input)
        stdout = ChildPipe(loop: loop, fd: output)
        stderr = ChildPipe(loop: loop, fd: errors)
        running = self
        stderr?.onReady = { [weak self] in self?.readStderr() }
        stderr?.wait(.readable)
    }

    /// A `ChildSpawner` is done: the child runs (its exit is watched from now on), or it
    /// never started: nothing to signal or reap, the ending is reported as exit 127.
    private func spawned(pid: pid_t, error: Int32, path: String) {
        guard error == 0 else {
            onSpawnFailure(error == ENOENT || error == EACCES ? .missingProgram(path: path, errno: error)
                                                              : .cannotSpawn(path: path, errno: error))
            termination = .exited(127)
            stdin?.close(); stdin = nil
            stdout?.close(); stdout = nil
            stderr?.close(); stderr = nil
            if let signalTimer { loop.arm(signalTimer, at: nil) }
            return release()
        }
        self.pid = pid
        watchExit()
    }

    // MARK: - What the owner does

    /// Closes our end of the child's stdin: it reads EOF after what was written.
    public func closeStdin() {
        stdin?.close()
        stdin = nil
    }

    /// The owner saw the end of the child's stdout (or gives up on it): closes our end.
    public func stdoutClosed() {
        stdout?.close()
        stdout = nil
        finishIfDone()
    }

    /// Ends the child: closes its stdin now (unless `closingStdin` is false: the owner
    /// closes it after writing what is queued), SIGTERM to its group `closeGrace` later,
    /// SIGKILL `killDelay` after that (each only if still needed). Idempotent; an earlier
    /// schedule is kept.
    public func endGroup(closingStdin: Bool = true) {
        if closingStdin { closeStdin() }
        scheduleSignals(after: options.closeGrace)
    }

    // MARK: - Exit and reaping

    /// Tests take the fallback path (as on a kernel without pidfd_open).
    nonisolated(unsafe) static var pidfdDisabled = false

    private func watchExit() {
        pidfd = ChildProcess.pidfdDisabled ? -1 : wsp_pidfd_open(pid)
        if pidfd >= 0 {
            let watch = loop.watch(pidfd) { [weak self] _ in self?.checkExit() }
            exitWatch = watch
            loop.setInterest(watch, .readable)
        } else {
            // No pidfd (Linux < 5.3, or out of descriptors): look every 50 ms.
            let timer = loop.timer { [weak self] in self?.pollExit() }
            pollTimer = timer
            loop.arm(timer, at: Instant.now().adding(seconds: 0.05))
        }
    }

    private func pollExit() {
        checkExit()
        if termination == nil, let pollTimer { loop.arm(pollTimer, at: Instant.now().adding(seconds: 0.05)) }
    }

    private func checkExit() {
        guard termination == nil else { return }
        var code: Int32 = -1, signal: Int32 = 0
        guard wsp_child_peek(pid, &code, &signal) == 1 else { return }
        let ended: ChildTermination = signal > 0 ? .signaled(signal) : .exited(code)
        termination = ended
        if let exitWatch { loop.remove(exitWatch) }
        exitWatch = nil
        if pidfd >= 0 { Glibc.close(pidfd) }
        pidfd = -1
        if let pollTimer { loop.arm(pollTimer, at: nil) }
        closeStdin()
        // What is left of the group may finish writing for `closeGrace`, then is ended.
        scheduleSignals(after: options.closeGrace)
        onExit(ended)
        finishIfDone()
    }

    private func scheduleSignals(after seconds: Double) {
        guard !isFinished, signalTimer == nil else { return }
        let timer = loop.timer { [weak self] in self?.signalGroup() }
        signalTimer = timer
        loop.arm(timer, at: Instant.now().adding(seconds: seconds))
    }

    private func signalGroup() {
        guard !isFinished, let signalTimer else { return }
        guard pid > 0 else {
            // Still being spawned: signal once it runs (killpg(0) would hit our own group).
            loop.arm(signalTimer, at: Instant.now().adding(seconds: 0.01))
            return
        }
        if !termSent {
            termSent = true
            _ = killpg(pid, SIGTERM)
            loop.arm(signalTimer, at: Instant.now().adding(seconds: options.killDelay))
            return
        }
        killSent = true
        _ = killpg(pid, SIGKILL)
        // Everything of the group is dead: a pipe still open is held by a process that left
        // the group; stop waiting for it.
        stderr?.close()
        stderr = nil
        finishIfDone()
        if !isFinished { loop.arm(signalTimer, at: Instant.now().adding(seconds: 0.05)) }
    }

    private func finishIfDone() {
        guard !isFinished, !sweeping, termination != nil, pid > 0 else { return }
        guard killSent || (stdout == nil && stderr == nil) else { return }
        // The zombie still holds the group id: nothing else can have it yet.
        _ = killpg(pid, SIGKILL)
        _ = wsp_child_reap(pid)
        stdin?.close(); stdin = nil
        stdout?.close(); stdout = nil
        stderr?.close(); stderr = nil
        if let signalTimer { loop.arm(signalTimer, at: nil) }
        guard pool.adoptsOrphans else { return release() }
        // Killed grandchildren come back to us (subreaper): reap them until the group is
        // gone, for at most a second.
        sweeping = true
        sweepUntil = Instant.now().adding(seconds: 1)
        sweep()
    }

    private var sweeping = false
    private var sweepUntil = Instant.now()
    private var sweepTimer: EventLoop.Timer?

    private func sweep() {
        while wsp_reap_group_member(pid) == 1 {}
        // ESRCH: no process (not even a zombie) is left in the group.
        if kill(-pid, 0) != 0 || Instant.now() >= sweepUntil { return release() }
        let timer = sweepTimer ?? loop.timer { [weak self] in self?.sweep() }
        sweepTimer = timer
        loop.arm(timer, at: Instant.now().adding(seconds: 0.005))
    }

    private func release() {
        guard !isFinished, let ended = termination else { return }
        isFinished = true
        pool.giveBack()
        let done = onFinish
        onExit = { _ in }
        onFinish = { _ in }
        done(ended)
        running = nil
    }

    // MARK: - stderr

    private func readStderr() {
        guard let pipe = stderr else { return }
        var chunk = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<16 {
            let result = chunk.withUnsafeMutableBytes { pipe.read(into: $0.baseAddress!, count: $0.count) }
            switch result {
            case .done(let n):
                splitStderr(chunk[0..<n])
            case .wouldBlock:
                return
            case .endOfStream, .failed:
                if !stderrLine.isEmpty { stderrSink(stderrLine) }
                stderrLine = []
                pipe.close()
                stderr = nil
                finishIfDone()
                return
            }
        }
    }

    private func splitStderr(_ bytes: ArraySlice<UInt8>) {
        var rest = bytes[...]
        while let newline = rest.firstIndex(of: 0x0A) {
            stderrLine += rest[rest.startIndex..<newline]
            stderrSink(stderrLine)
            stderrLine.removeAll(keepingCapacity: true)
            rest = rest[(newline + 1)...]
        }
        stderrLine += rest
        while stderrLine.count >= options.stderrLineLimit {
            stderrSink(Array(stderrLine.prefix(options.stderrLineLimit)))
            stderrLine.removeFirst(options.stderrLineLimit)
        }
    }

    // MARK: - Helpers

    private static func value(of name: String, in environment: [String]) -> String? {
        let prefix = name + "="
        return environment.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }

    static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for pointer in pointers { free(pointer) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
