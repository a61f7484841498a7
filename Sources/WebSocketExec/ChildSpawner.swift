import CWSPipeShims
import Glibc
import WebSocketEngine

/// Runs `posix_spawn` on a few helper threads for one loop: glibc's posix_spawn
/// (CLONE_VFORK) holds the calling thread until the child has exec'd (1-2 ms on a loaded
/// machine), and on the loop's thread every other connection waited that long, one spawn
/// after another. Results come back to the loop through an eventfd it watches.
public final class ChildSpawner {
    private let spawner: OpaquePointer
    private let loop: EventLoop
    private var watch: EventLoop.Watch?
    private var waiting: [UInt64: (_ pid: pid_t, _ error: Int32) -> Void] = [:]
    private var nextID: UInt64 = 1

    /// Nil when no thread (or eventfd) could be made: callers spawn on their own thread.
    public init?(loop: EventLoop, threads: Int = 4) {
        guard let spawner = wsp_spawner_new(Int32(threads)) else { return nil }
        self.spawner = spawner
        self.loop = loop
        let watch = loop.watch(wsp_spawner_fd(spawner)) { [weak self] _ in self?.collect() }
        self.watch = watch
        loop.setInterest(watch, .readable)
    }

    deinit {
        if let watch { loop.remove(watch) }
        wsp_spawner_free(spawner)
    }

    /// Spawns `path` with the child's ends `input`, `output`, `errors` as its 0, 1, 2 (closed
    /// here once spawned, or not; so is `executable`, run instead of `path` when given); `done` runs on the loop's thread with the pid, or with
    /// posix_spawn's errno. Returns an errno when the job could not even be queued (the
    /// descriptors are then still the caller's).
    func spawn(_ path: String, arguments: [String], environment: [String], input: Int32, output: Int32, errors: Int32,
               executable: Int32 = -1, done: @escaping (_ pid: pid_t, _ error: Int32) -> Void) -> Int32 {
        let id = nextID
        nextID += 1
        let result = ChildProcess.withCStrings(arguments) { argv in
            ChildProcess.withCStrings(environment) { envp in
                wsp_spawner_submit(spawner, id, path, argv, envp, input, output, errors, executable)
            }
        }
        if result == 0 { waiting[id] = done }
        return result
    }

    private func collect() {
        _ = wsp_eventfd_drain(wsp_spawner_fd(spawner))
        var id: UInt64 = 0, pid: pid_t = 0, error: Int32 = 0
        while wsp_spawner_take(spawner, &id, &pid, &error) == 1 {
            waiting.removeValue(forKey: id)?(pid, error)
        }
    }
}
