import CWSPipeShims
import Glibc
import WSPipeBridge

/// The whole command: parse the arguments, run the session, return the exit status.
/// `main.swift` only calls this.
@inline(never)
public func wspipeMain(arguments: [String], environment: (String) -> String?) -> Int32 {
    occupyClosedStandardDescriptors()
    let command: Command
    var notes: [String] = []
    do {
        command = try CommandLineParser.parse(arguments, environment: environment, note: { notes.append($0) })
    } catch {
        let failure = Failure.usage(error.message, pointsAtHelp: error.pointsAtHelp, topic: error.helpCategory?.rawValue)
        return Diagnostics(verbosity: 0).report(failure).rawValue
    }
    switch command {
    case .help(let topic):
        writeAll(1, Array(topic.text.utf8))
        return 0
    case .version:
        writeLine(1, "wspipe \(wspipeVersion)")
        return 0
    case .run(let config):
        if config.verbosity >= 0 { for note in notes { writeLine(2, "wspipe: \(note)") } }
        if let serve = config.serve { return runServer(config, serve).rawValue }
        if let address = config.forwardListen { return runForwardListen(config, on: address).rawValue }
        return runBridge(config).rawValue
    }
}

/// The end of the process, after `wspipeMain` (everything written, `--stats` printed): a run
/// that SIGINT, SIGTERM or SIGHUP stopped dies of that signal, so that a shell's loop stops
/// at the first Ctrl-C; any other run exits with `status`.
public func wspipeExit(_ status: Int32) -> Never {
    dieOfSignalIfStopped()
    exit(status)
}

/// A closed stdin, stdout or stderr (`<&-`, `>&-`) would otherwise be taken by the first
/// descriptor wspipe opens (its eventfd, the socket): stdin would read the eventfd and
/// diagnostics would go into the WebSocket connection. Each closed one is opened on
/// /dev/null before anything else: stdin then reads end of input, stderr discards, and
/// stdout is opened read-only so that writing to it still fails (EBADF).
private func occupyClosedStandardDescriptors() {
    for fd: Int32 in 0...2 where wsp_get_fl(fd) < 0 && errno == EBADF {
        let mode = fd == 2 ? O_WRONLY : O_RDONLY
        _ = open("/dev/null", mode)
    }
}

private func writeLine(_ fd: Int32, _ text: String) {
    writeAll(fd, Array(text.utf8) + [0x0A])
}
