// wspipe: the command line. Everything, argument parsing included, lives in WSPipeCLI
// (see wspipeMain, and wspipeExit for the end: a run a signal stopped dies of it); this
// file only connects it to the process.
import Glibc
import WSPipeCLI

wspipeExit(wspipeMain(arguments: Array(CommandLine.arguments.dropFirst()),
                      environment: { name in getenv(name).map { String(cString: $0) } }))
