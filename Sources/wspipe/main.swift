// wspipe: the command line. Everything, argument parsing included, lives in WSPipeBridge
// (see wspipeMain); this file only connects it to the process.
import Glibc
import WSPipeBridge

exit(wspipeMain(arguments: Array(CommandLine.arguments.dropFirst()),
                environment: { name in getenv(name).map { String(cString: $0) } }))
