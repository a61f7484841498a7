import Glibc
import WebSocketCore
import WebSocketTransport

/// `--dir DIR`: which program a request path names, websocketd's way (the longest existing
/// prefix of the path that is a file names the program; the rest is `PATH_INFO`), and
/// stricter: a path `RequestPath` refuses, a symbolic link on the way (even one pointing
/// inside), a directory, a non-executable or non-regular file all name no program (404).
/// The program comes back as a descriptor opened beneath DIR, so what runs is what was
/// checked (`ChildProcess`'s `executable`).
public final class ProgramDirectory {
    /// DIR made absolute (argv[0] and `SCRIPT_FILENAME` are DIR + `SCRIPT_NAME`).
    public let path: String
    private let resolver: BeneathResolver
    public var mechanism: BeneathResolver.Mechanism { resolver.mechanism }

    /// Opens `directory`; throws when it cannot be opened as one.
    public init(directory: String) throws(ResolveFailure) {
        resolver = try BeneathResolver(directory: directory)
        var absolute = directory
        if let real = realpath(directory, nil) {
            absolute = String(cString: real)
            free(real)
        }
        path = absolute == "/" ? "" : absolute
    }

    /// The program for the request target `target` (its path; the query is not looked at).
    public func program(for target: String) -> Result<Program, NoProgram> {
        let requestPath: RequestPath
        do throws(RequestPath.Refusal) { requestPath = try RequestPath(target: target) } catch { return .failure(.path(error)) }
        do throws(ResolveFailure) {
            let found = try resolver.program(for: requestPath)
            let scriptName = String(decoding: requestPath.prefix(found.programSegments), as: UTF8.self)
            return .success(Program(entry: found.entry, scriptName: scriptName,
                                    pathInfo: String(decoding: requestPath.suffix(from: found.programSegments), as: UTF8.self),
                                    file: path + scriptName))
        } catch {
            return .failure(.file(error))
        }
    }

    /// A program found: its descriptor and the CGI names for it.
    public struct Program {
        /// The O_PATH descriptor (take it to spawn).
        public let entry: OpenedEntry
        /// "/sub/deep/prog": the path's segments naming the program, decoded.
        public let scriptName: String
        /// The rest of the path, decoded ("" when nothing follows).
        public let pathInfo: String
        /// The program's absolute path (DIR + scriptName), for argv[0] and SCRIPT_FILENAME.
        public let file: String
    }

    /// Why a path names no program (the client gets 404; `-v` says this).
    public enum NoProgram: Error, Equatable, Sendable, CustomStringConvertible {
        case path(RequestPath.Refusal)
        case file(ResolveFailure)

        public var description: String {
            switch self {
            case .path(let refusal): return refusal.description
            case .file(.outsideRoot): return "it resolves outside the directory"
            case .file(let failure): return failure.description
            }
        }
    }
}
