// wspipe: the command line. Parsing and the session live in WSPipeBridge; this file only
// connects them to the process (arguments, environment, exit status).
import CWSPipeShims
import Glibc
import WSPipeBridge

func environment(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}

func writeStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    bytes.append(0x0A)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

func writeStandardOutput(_ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

let command: Command
do {
    command = try CommandLineParser.parse(Array(CommandLine.arguments.dropFirst()), environment: environment)
} catch {
    writeStandardError("wspipe: \(error.message) (see wspipe --help)")
    exit(ExitStatus.usage.rawValue)
}

switch command {
case .help:
    writeStandardOutput(helpText)
    exit(0)
case .version:
    writeStandardOutput("wspipe \(wspipeVersion)\n")
    exit(0)
case .run(let config):
    wsp_ignore_sigpipe()
    let log = Diagnostics(verbosity: config.verbosity)
    do {
        let session = try Session(config: config, log: log)
        exit(session.run().rawValue)
    } catch {
        log.error("\(error)")
        exit(ExitStatus.localError.rawValue)
    }
}
