import Glibc
import WebSocketCore
import WebSocketEngine

/// Serves a child process per connection (`ServerDriver`'s mode for `--exec`/`--sh`):
/// the child gets the connection's CGI environment, an `ExecBridge` carries the messages.
///
/// A full `ChildPool` refuses the handshake with 503 (`refusal(for:)`); a child that cannot
/// start after the 101 (the pool filled meanwhile, fork failed) closes the connection with
/// 1013 "Try Again Later" or 1011 "cannot start PROGRAM: reason".
public final class ExecMode: ServerMode {
    public let loop: EventLoop
    /// The program (its path resolved on our PATH once, at init) and its arguments.
    public let command: ChildCommand
    public let pool: ChildPool
    public var childOptions = ChildOptions()
    public var options = ExecOptions()
    /// Names of the parent's variables the child also gets (besides PATH).
    public var passing: [String] = []
    /// The server checks a bearer token (`--require-bearer`): programs do not see it
    /// (`ConnectionFacts.bearerChecked`).
    public var bearerChecked = false
    /// `SERVER_SOFTWARE`: "wspipe/VERSION".
    public var serverSoftware: String
    /// A line the child of client `id` wrote to stderr (without its newline).
    public var stderr: (_ client: Int, _ line: [UInt8]) -> Void = { _, _ in }
    /// A child could not be started for client `id` after its 101.
    public var onSpawnFailure: (_ client: Int, ChildError) -> Void = { _, _ in }
    /// `--dir`: each client's program comes from its request's path (`command.arguments` go
    /// to none of them); nil: `command` for every client.
    public var directory: ProgramDirectory?
    /// `--dir` answered a request 404: its target and why (the `-v` line).
    public var onNoProgram: (_ target: String, _ why: ProgramDirectory.NoProgram) -> Void = { _, _ in }
    /// Client `id`'s connection and child are both over.
    public var onOutcome: (_ client: Int, ExecOutcome) -> Void = { _, _ in }
    private let parent: (String) -> String?
    /// posix_spawn off the loop's thread (nil if its threads could not be made: then on it).
    private lazy var spawner: ChildSpawner? = ChildSpawner(loop: loop)

    public init(loop: EventLoop, command: ChildCommand, pool: ChildPool, serverSoftware: String,
                parent: @escaping (String) -> String? = { name in getenv(name).map { String(cString: $0) } }) {
        self.loop = loop
        // Looked up on PATH once, not for every client (the children's PATH is ours).
        let path = parent("PATH")
        self.command = (try? command.executablePath(searchPath: path)).map { ChildCommand(program: $0, arguments: command.arguments) } ?? command
        self.pool = pool
        self.serverSoftware = serverSoftware
        self.parent = parent
    }

    public var childrenRunning: Int? { pool.running }

    public func refusal(for request: HandshakeRequest) -> ModeRefusal? {
        if let directory, case .failure(let why) = directory.program(for: request.head.target) {
            onNoProgram(request.head.target, why)
            if case .file(let failure) = why, failure.isOutOfDescriptors {
                // The program may well be there: not a 404 (a cache would keep that).
                return ModeRefusal(status: 503, headers: [HTTPHeader(name: "Retry-After", value: "1")],
                                   body: "the server has no file descriptor left to look for the program")
            }
            return ModeRefusal(status: 404, body: "no program at this path")
        }
        guard !pool.hasRoom else { return nil }
        return ModeRefusal(status: 503, headers: [HTTPHeader(name: "Retry-After", value: "1")],
                           body: "too many programs running (the limit is \(pool.limit))")
    }

    /// --dir: only the paths that name a program (no -v line: this is a console page's question).
    public func servesUpgrades(at target: String) -> Bool {
        guard let directory else { return true }
        if case .success = directory.program(for: target) { return true }
        return false
    }

    public func handler(for connection: ServerConnection) -> ConnectionDelegate {
        let info = connection.info
        // The client as a trusted proxy named it (no port from X-Forwarded-For); none on a Unix socket.
        let local = ConnectionFacts.split(info.localAddress)
        var facts = ConnectionFacts(remoteAddress: info.clientAddress.ip?.description ?? "",
                                    remotePort: info.clientAddress.port.map(Int.init), localAddress: local.address,
                                    localPort: local.port, isTLS: info.isSecure,
                                    clientCertificateSubject: info.clientCertificateSubject, subprotocol: info.subprotocol,
                                    uniqueID: String(info.id))
        facts.bearerChecked = bearerChecked
        let id = info.id
        // Always there while the connection is handed over (`ClientInfo.request`).
        guard let request = info.request else {
            refuse(connection, id, .cannotCreate(what: "the program's environment (the request is gone)", errno: EINVAL))
            return RefusedChild()
        }
        // --dir: resolved again (the 404 check was before the 101); what runs is this descriptor.
        var program = command, executable: Int32 = -1, script: (name: String, pathInfo: String, file: String)?
        if let directory {
            switch directory.program(for: request.head.target) {
            case .success(let found):
                program = ChildCommand(program: found.file)
                executable = found.entry.take()
                script = (found.scriptName, found.pathInfo, found.file)
            case .failure:
                refuse(connection, id, .missingProgram(path: request.path, errno: ENOENT))
                return RefusedChild()
            }
        }
        let cgi = CGIEnvironment.variables(for: request, connection: facts, serverSoftware: serverSoftware, script: script)
        let environment = CGIEnvironment.childEnvironment(cgi: cgi, passing: passing, parent: parent)
        let child: ChildProcess
        do throws(ChildError) {
            child = try ChildProcess(program, environment: environment, loop: loop, pool: pool, options: childOptions,
                                     spawner: spawner, executable: executable) { [weak self] line in
                self?.stderr(id, line)
            }
        } catch {
            refuse(connection, id, error)
            return RefusedChild()
        }
        // Spawned on the spawner's threads: a failure comes back once the loop turns, after
        // the driver started (the bridge then sees no child output).
        child.onSpawnFailure = { [weak self, weak connection] error in
            guard let self, let connection else { return }
            refuse(connection, id, error)
        }
        let bridge = ExecBridge(child: child, options: options)
        bridge.onEnd = { [weak self] outcome in self?.onOutcome(id, outcome) }
        // The server starts the driver after this returns.
        loop.later { [weak connection] in
            bridge.begin(connection?.driver)
        }
        return bridge
    }

    /// The bridge answers the client's Close once the child has said its last (or the grace
    /// passed), so the driver must not echo it at once.
    public func connectionWillStart(_ connection: ServerConnection, driver: ConnectionDriver) {
        if connection.handler is ExecBridge { driver.answersCloseItself = true }
    }
}

extension ExecMode {
    /// The child could not start: reported, and the connection closed (1013 when too many
    /// programs run, else 1011).
    private func refuse(_ connection: ServerConnection, _ id: Int, _ error: ChildError) {
        onSpawnFailure(id, error)
        let payload: ClosePayload
        if case .tooManyChildren = error {
            payload = ClosePayload(code: CloseCode(1013), reason: Array("too many programs running".utf8))
        } else {
            payload = ClosePayload(code: .internalError, reason: Array("cannot start the program".utf8))
        }
        loop.later { [weak connection] in connection?.driver?.close(payload) }
    }
}

/// The delegate of a connection whose child could not start: it is being closed.
final class RefusedChild: ConnectionDelegate {
    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {}
    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {}
    func connectionDidEndMessage(_ connection: ConnectionDriver) {}
    func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {}
}
