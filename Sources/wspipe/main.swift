// wspipe: the command line. Everything, argument parsing included, lives in WSPipeCLI
// (see wspipeMain); this file only connects it to the process.
import Glibc
import WSPipeCLI

exit(wspipeMain(arguments: Array(CommandLine.arguments.dropFirst()),
                environment: { name in getenv(name).map { String(cString: $0) } }))
