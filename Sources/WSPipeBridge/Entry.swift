import CWSPipeShims
import Glibc
import WebSocketEngine

/// The whole command: parse the arguments, run the session, return the exit status.
///
/// `main.swift` only calls this. Keeping every type with a stored layout (Session and the
/// structs inside it) on this side of the module boundary means the executable never has
/// their sizes inlined: with cross-module optimisation, an incremental release build once
/// left main.swift allocating a Session of a stale, smaller size.
@inline(never)
public func wspipeMain(arguments: [String], environment: (String) -> String?) -> Int32 {
    occupyClosedStandardDescriptors()
    let command: Command
    do {
        command = try CommandLineParser.parse(arguments, environment: environment)
    } catch {
        writeLine(2, "wspipe: \(error.message) (see wspipe --help)")
        return ExitStatus.usage.rawValue
    }
    switch command {
    case .help:
        writeAll(1, Array(helpText.utf8))
        return 0
    case .version:
        writeLine(1, "wspipe \(wspipeVersion)")
        return 0
    case .run(let config):
        wsp_ignore_sigpipe()
        let log = Diagnostics(verbosity: config.verbosity)
        do {
            let session = try Session(config: config, log: log)
            return session.run().rawValue
        } catch {
            log.error("\(error)")
            return ExitStatus.localError.rawValue
        }
    }
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

/// Writes all of `bytes` with write(2), retrying after EINTR; gives up on any other error
/// (a closed or broken stderr is nothing to report).
func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
            if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
        }
    }
}
