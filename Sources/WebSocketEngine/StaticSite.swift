import Glibc
import WebSocketCore
import WebSocketTransport

/// What a server answers to plain GETs besides --health and --metrics: files beneath a
/// directory and a console page for its WebSocket paths.
public struct StaticSiteConfiguration: Sendable {
    /// The directory whose regular files are served (nil: none).
    public var root: String?
    /// Serve the console page at every path that accepts a WebSocket upgrade.
    public var devConsole = false

    public init() {}

    var isEmpty: Bool { root == nil && !devConsole }
}

/// An answer to a plain HTTP request: its head, the part of a file that follows as its body
/// (owned: closed by whoever sends it), and whether the connection stays open for the next request.
struct SiteAnswer {
    var head: [UInt8]
    var body: [UInt8] = []
    var file: (descriptor: Int32, offset: UInt64, count: UInt64)?
    var keepAlive: Bool
    /// A 404's or 403's reason and the request target it was for (the -v line).
    var notServed: (target: String, why: StaticNotFound)?

    /// The status code of the head's status line (the metrics count answers by it).
    var status: Int { HandshakeExchange.status(of: head) }
}

/// Why --static answered 404: the path rules or the resolver's reason, or nothing to
/// serve at an existing entry; or 403: an entry on the way we may not open (`status`).
public enum StaticNotFound: Equatable, Sendable, CustomStringConvertible {
    case path(RequestPath.Refusal)
    case file(ResolveFailure)
    /// A directory without a regular index.html.
    case noIndex(ResolveFailure?)
    /// A regular file asked for with a trailing slash.
    case fileWithSlash
    /// No file, and the console page is not served at this path.
    case noConsole

    /// 403 where the file system said EACCES (the file is not readable by us, a directory
    /// on the way not searchable: nginx's answer); 404 for the rest, dotfiles and symbolic
    /// links included (the path rules and the resolver refuse those before any permission
    /// is asked).
    public var status: Int {
        switch self {
        case .file(.denied), .noIndex(.denied?): return 403
        default: return 404
        }
    }

    public var description: String {
        switch self {
        case .path(let refusal): return refusal.description
        case .file(let failure): return failure.description
        case .noIndex(.denied?): return "the directory's index.html: permission denied"
        case .noIndex(let failure): return "a directory without index.html" + (failure.map { " (\($0))" } ?? "")
        case .fileWithSlash: return "a file asked for with a trailing slash"
        case .noConsole: return "no file, and no WebSocket path for the console"
        }
    }
}

/// Answers plain requests from a directory and the console page. The path rules are
/// --dir's (`RequestPath`: decoded once, dot segments, dotfiles, backslash, NUL, empty and
/// encoded-slash segments refused) and so is the opening (`BeneathResolver`: openat2 with
/// RESOLVE_BENEATH and no symbolic links, or an O_NOFOLLOW walk), so nothing outside the
/// directory is reached whatever the tree does meanwhile. Loop thread only: an open or
/// fstat of a local file does not wait on the network.
final class StaticSite {
    let configuration: StaticSiteConfiguration
    private let resolver: BeneathResolver?

    init(_ configuration: StaticSiteConfiguration) {
        self.configuration = configuration
        resolver = configuration.root.flatMap { try? BeneathResolver(directory: $0) }
    }

    /// The answer to a request that is no WebSocket upgrade, or nil when the site has none
    /// (the handshake's own refusal follows: 426, or 405 for another method).
    /// `mayKeepAlive` false: every answer closes the connection (a server that takes one
    /// client at a time does not hold an idle one).
    /// `servesUpgrades`: the mode's word on a path (--dir: whether it names a program).
    func answer(_ head: HTTPRequestHead, policy: HandshakePolicy, mayKeepAlive: Bool = true,
                servesUpgrades: (String) -> Bool = { _ in true }) -> SiteAnswer? {
        let fields = RequestFields(head)
        let keepAlive = mayKeepAlive && StaticSite.keepsAlive(fields, version: head.version)
        let readsOnly = head.method == "GET" || head.method == "HEAD"
        if case .refuse(let status, let headers, let body) = policy.bearerRefusal(head) {
            return small(status, headers, body, keepAlive, head)
        }
        var notServed = StaticNotFound.noConsole
        if let resolver {
            // A path the rules refuse (a dotfile, `..`, a backslash, NUL) is no file and no console.
            let target: RequestPath
            do throws(RequestPath.Refusal) { target = try RequestPath(target: head.target) } catch {
                return readsOnly ? unserved(.path(error), keepAlive, head) : nil
            }
            switch StaticSite.resolve(target, with: resolver) {
            case .file(let descriptor, let info, let name):
                guard readsOnly else {
                    close(descriptor)
                    return small(405, [HTTPHeader(name: "Allow", value: "GET, HEAD")], "use GET or HEAD", keepAlive, head)
                }
                return fileAnswer(head, fields, descriptor: descriptor, info: info, name: name, keepAlive: keepAlive)
            case .directoryWithoutSlash:
                guard readsOnly else {
                    return small(405, [HTTPHeader(name: "Allow", value: "GET, HEAD")], "use GET or HEAD", keepAlive, head)
                }
                return small(301, [HTTPHeader(name: "Location", value: StaticSite.slashLocation(head.target))], "", keepAlive, head)
            case .outOfDescriptors:
                // Not a 404 (a cache would keep that); closing gives one descriptor back.
                return small(503, [HTTPHeader(name: "Retry-After", value: "1")], "the server has no file descriptor left to open the file",
                             false, head)
            case .none(let why):
                // EACCES: something is there that we may not read; 403 before any console page.
                if why.status == 403, readsOnly { return unserved(why, keepAlive, head) }
                notServed = why
            }
        }
        if configuration.devConsole, policy.path.map({ HandshakePolicy.pathOf(head.target) == $0 }) ?? true,
           servesUpgrades(head.target) {
            guard readsOnly else {
                return small(405, [HTTPHeader(name: "Allow", value: "GET, HEAD")], "use GET or HEAD", keepAlive, head)
            }
            let page = Array(DevConsolePage.html.utf8)
            let headText = "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(page.count)\r\n"
                + "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\(StaticSite.connectionHeader(keepAlive))\r\n"
            return SiteAnswer(head: Array(headText.utf8), body: head.method == "HEAD" ? [] : page, keepAlive: keepAlive)
        }
        guard readsOnly else { return nil }
        return unserved(notServed, keepAlive, head)
    }

    /// The 404 (or 403) for `why`, with it for the -v line.
    private func unserved(_ why: StaticNotFound, _ keepAlive: Bool, _ head: HTTPRequestHead) -> SiteAnswer {
        var answer = small(why.status, [], why.status == 403 ? "forbidden" : "not found", keepAlive, head)
        answer.notServed = (head.target, why)
        return answer
    }

    /// A 301's Location: the raw target's path with a slash added, its query kept (of an
    /// absolute-form target, its origin-form: the authority is not ours to repeat). The raw
    /// bytes passed the request parser (visible ASCII, no CR or LF); leading slashes are one,
    /// so "//host" cannot become a redirect to another host.
    static func slashLocation(_ target: String) -> String {
        let origin = RequestTarget.originForm(target) ?? Substring(target)
        let (path, query) = origin.firstIndex(of: "?").map { (origin[..<$0], origin[$0...]) } ?? (origin, "")
        return "/" + path.drop { $0 == "/" } + "/" + query
    }

    /// HTTP/1.1 keeps the connection unless the client says close; HTTP/1.0 only when it
    /// asks for keep-alive. A request with a body ends it (we read no body): any length but
    /// "0" on any of its Content-Length lines, or the body would be read as the next request.
    static func keepsAlive(_ head: RequestFields, version: String) -> Bool {
        if !head.values("Transfer-Encoding").isEmpty { return false }
        if head.values("Content-Length").contains(where: { $0 != "0" }) { return false }
        if head.listContains("Connection", "close") { return false }
        return version == "HTTP/1.1" ? true : head.listContains("Connection", "keep-alive")
    }

    static func reason(_ status: Int) -> String { HTTPResponse.reasonPhrase(status) }

    static func connectionHeader(_ keepAlive: Bool) -> String {
        keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n"
    }

    private func small(_ status: Int, _ headers: [HTTPHeader], _ text: String, _ keepAlive: Bool,
                       _ head: HTTPRequestHead) -> SiteAnswer {
        let body = text.isEmpty ? [] : Array((text + "\n").utf8)
        var lines = "HTTP/1.1 \(status) \(StaticSite.reason(status))\r\n"
        for header in headers { lines += "\(header.name): \(header.value)\r\n" }
        if !body.isEmpty { lines += "Content-Type: text/plain; charset=utf-8\r\n" }
        lines += "Content-Length: \(body.count)\r\n\(StaticSite.connectionHeader(keepAlive))\r\n"
        return SiteAnswer(head: Array(lines.utf8), body: head.method == "HEAD" ? [] : body, keepAlive: keepAlive)
    }

    /// What a file's answers repeat while it does not change (formatting them is most of a
    /// small file's cost), by device, inode, size and modification time.
    private struct Described {
        var validators: FileValidators
        /// Content-Type, Accept-Ranges, X-Content-Type-Options, then `notModifiedLines`.
        var lines: String
        /// Last-Modified, ETag, Cache-Control.
        var notModifiedLines: String
    }
    private struct Identity: Hashable {
        var device, inode: UInt64
        var size, seconds, nanoseconds: Int64
        var name: String
    }
    private var described: [Identity: Described] = [:]

    private func describe(_ info: EntryFacts, name: String) -> Described {
        let identity = Identity(device: info.device, inode: info.inode, size: info.size, seconds: info.modifiedSeconds,
                                nanoseconds: info.modifiedNanoseconds, name: name)
        if let known = described[identity] { return known }
        let validators = FileValidators(inode: info.inode, size: UInt64(max(0, info.size)), modifiedSeconds: info.modifiedSeconds,
                                        modifiedNanoseconds: info.modifiedNanoseconds)
        let shared = "Last-Modified: \(validators.lastModified)\r\nETag: \(validators.etag)\r\nCache-Control: no-cache\r\n"
        let entry = Described(validators: validators,
                              lines: "Content-Type: \(ContentTypes.forName(name))\r\nAccept-Ranges: bytes\r\nX-Content-Type-Options: nosniff\r\n"
                                + shared,
                              notModifiedLines: shared)
        if described.count >= 1024 { described.removeAll(keepingCapacity: true) }  // a bound, not an LRU
        described[identity] = entry
        return entry
    }

    private func fileAnswer(_ head: HTTPRequestHead, _ fields: RequestFields, descriptor: Int32, info: EntryFacts, name: String,
                            keepAlive: Bool) -> SiteAnswer {
        let size = UInt64(max(0, info.size))
        let description = describe(info, name: name)
        let validators = description.validators
        let connection = StaticSite.connectionHeader(keepAlive)
        if validators.notModified(fields, now: Int64(time(nil))) {
            close(descriptor)
            return SiteAnswer(head: Array("HTTP/1.1 304 Not Modified\r\n\(description.notModifiedLines)\(connection)\r\n".utf8),
                              keepAlive: keepAlive)
        }
        var lines = description.lines + connection
        var (status, first, count) = (200, UInt64(0), size)
        if let range = fields.values("Range").first, validators.rangeApplies(fields) {
            switch ByteRangeRequest.parse(range, size: size) {
            case .whole: break
            case .range(let from, let last):
                (status, first, count) = (206, from, last - from + 1)
                lines += "Content-Range: bytes \(from)-\(last)/\(size)\r\n"
            case .unsatisfiable:
                close(descriptor)
                return SiteAnswer(head: Array(("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */\(size)\r\n"
                                               + "Content-Length: 0\r\n\(StaticSite.connectionHeader(keepAlive))\r\n").utf8), keepAlive: keepAlive)
            }
        }
        let text = "HTTP/1.1 \(status) \(StaticSite.reason(status))\r\nContent-Length: \(count)\r\n" + lines + "\r\n"
        if head.method == "HEAD" || count == 0 {
            close(descriptor)
            return SiteAnswer(head: Array(text.utf8), keepAlive: keepAlive)
        }
        return SiteAnswer(head: Array(text.utf8), file: (descriptor, first, count), keepAlive: keepAlive)
    }

    enum Resolved {
        /// An open regular file (ours to close), what fstat said and the name its type comes from.
        case file(Int32, EntryFacts, String)
        /// A directory asked for without its trailing slash (301).
        case directoryWithoutSlash
        /// The process or system is out of descriptors (EMFILE, ENFILE): the file may well
        /// exist (503, not 404).
        case outOfDescriptors
        /// Nothing to serve: missing, a symbolic link on the path, a device, a FIFO, a
        /// directory without index.html, a file asked for with a trailing slash: why.
        case none(StaticNotFound)
    }

    static func resolve(_ target: RequestPath, with resolver: BeneathResolver) -> Resolved {
        var entry: OpenedEntry
        do throws(ResolveFailure) { entry = try resolver.open(segments: target.segments) } catch {
            return error.isOutOfDescriptors ? .outOfDescriptors : .none(.file(error))
        }
        var name = target.segments.last.map { String(decoding: $0, as: UTF8.self) } ?? ""
        switch entry.facts.kind {
        case .directory:
            guard target.hasTrailingSlash || target.segments.isEmpty else { return .directoryWithoutSlash }
            do throws(ResolveFailure) { entry = try resolver.open(Array("index.html".utf8), in: entry) } catch {
                return error.isOutOfDescriptors ? .outOfDescriptors : .none(.noIndex(error))
            }
            name = "index.html"
            guard entry.facts.kind == .regular else { return .none(.noIndex(nil)) }
        case .regular:
            guard !target.hasTrailingSlash else { return .none(.fileWithSlash) }
        case .symlink:
            return .none(.file(.symlink))
        case .other:
            return .none(.file(.notRegular))
        }
        return .file(entry.take(), entry.facts, name)
    }
}

/// The few request headers the site reads, found in one pass without lowercasing every
/// name for each question (HTTPHeaderFields' lookups do; a 4 KiB GET asks nine of them).
struct RequestFields: HTTPHeaderFields {
    var headers: [HTTPHeader] = []

    private static let wanted: [[UInt8]] = ["connection", "content-length", "transfer-encoding", "range", "if-range",
                                            "if-none-match", "if-modified-since"].map { Array($0.utf8) }

    init(_ head: HTTPRequestHead) {
        for header in head.headers where RequestFields.isWanted(header.name) { headers.append(header) }
    }

    /// Compared without allocating (a lowercased copy of every name for each lookup was
    /// most of the cost); header names are tokens, so ASCII folding is the whole rule.
    func values(_ name: String) -> [String] {
        var found: [String] = []
        for header in headers where RequestFields.sameName(header.name, name) { found.append(header.value) }
        return found
    }

    private static func isWanted(_ name: String) -> Bool {
        wanted.contains { word in word.count == name.utf8.count && zip(word, name.utf8).allSatisfy { $0 == fold($1) } }
    }

    static func sameName(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { fold($0) == fold($1) }
    }

    private static func fold(_ byte: UInt8) -> UInt8 { (65...90).contains(byte) ? byte | 0x20 : byte }
}
