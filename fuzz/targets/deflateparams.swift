// libFuzzer target `deflateparams`: the permessage-deflate parameter parser and both sides
// of its negotiation (RFC 7692 §7.1) on arbitrary Sec-WebSocket-Extensions text.
//
// Compiled into the WebSocketCore module itself (see fuzz/run).
//
// Input: byte 0 picks the client's offer (bits 0-3: which parameters, bit 4: window values);
// the rest is decoded as UTF-8 and parsed as a header value.
//
// Checks:
//   - nothing crashes; parsing either throws or gives elements
//   - a response the client accepts has window bits 8...15 and only offered parameters
//     (client_max_window_bits only when offered, never above an offered value)
//   - the server answers any offer list with nil or an element that parses back, and the
//     client that made that offer accepts the answer
//   - the configuration of an accepted response has windows 8...15 both ways
//   - with each server setting (defaults, forced no-context-takeover, small windows): the
//     configuration the server keeps is what its answer means, within its own window

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDeflateParameters(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 1 else { return 0 }
    let pick = data[0]
    var offered = DeflateParameters()
    offered.serverNoContextTakeover = pick & 1 != 0
    offered.clientNoContextTakeover = pick & 2 != 0
    if pick & 4 != 0 { offered.serverMaxWindowBits = 8 + Int(pick >> 5) }
    if pick & 8 != 0 { offered.clientMaxWindowBits = pick & 16 != 0 ? .bits(9 + Int(pick >> 5)) : .withoutValue }
    let text = String(decoding: UnsafeBufferPointer(start: data + 1, count: size - 1), as: UTF8.self)
    guard let elements = try? ExtensionOffer.parse(text) else { return 0 }

    let client = PerMessageDeflate.client(offered)
    for element in elements {
        guard let accepted = try? client.acceptedParameters(element) else { continue }
        if let bits = accepted.serverMaxWindowBits {
            check((8...15).contains(bits), "accepted server_max_window_bits=\(bits)")
            if let limit = offered.serverMaxWindowBits { check(bits <= limit, "above the offered server window") }
        }
        switch (accepted.clientMaxWindowBits, offered.clientMaxWindowBits) {
        case (.bits, .absent): check(false, "accepted client_max_window_bits that was not offered")
        case (.bits(let bits), .bits(let limit)): check(bits <= limit, "above the offered client window")
        case (.withoutValue, _): check(false, "a response's client_max_window_bits without a value")
        default: break
        }
        let configuration = DeflateConfiguration(agreed: accepted, role: .client)
        check((8...15).contains(configuration.incomingWindowBits) && (8...15).contains(configuration.outgoingWindowBits),
              "window out of range")
    }

    // The server's settings vary with the input's length: the defaults, both
    // no-context-takeover flags forced, small windows (the --deflate-* meanings with -l).
    let server = switch size % 3 {
    case 0: PerMessageDeflate.server()
    case 1: PerMessageDeflate.server(serverNoContextTakeover: true, clientNoContextTakeover: true)
    default: PerMessageDeflate.server(windowBits: 9, clientWindowBits: min(15, 9 + Int(pick >> 5)))
    }
    if let (answer, agreed) = server.negotiate(elements) {
        // What the server configures is what the answer means for it.
        guard let parsed = try? DeflateParameters.parse(answer, isOffer: false) else {
            check(false, "the server's answer does not parse as a response: \((try? answer.headerValue()) ?? "?")")
            return 0
        }
        check(agreed.configuration == DeflateConfiguration(agreed: parsed, role: .server), "configuration differs from the answer")
        if let configuration = agreed.configuration {
            check(configuration.outgoingWindowBits <= server.serverWindowBits, "compressing above our own window")
            check(!server.serverNoContextTakeover || configuration.outgoingNoContextTakeover, "forced server_no_context_takeover lost")
            check(!server.clientNoContextTakeover || configuration.incomingNoContextTakeover, "forced client_no_context_takeover lost")
        }
    }
    if let answer = server.respond(to: elements) {
        guard let header = try? answer.headerValue(), let reparsed = try? ExtensionOffer.parse(header) else {
            check(false, "the server's answer is not a header value")
            return 0
        }
        check(reparsed == [answer], "the answer does not parse back")
        // The offer that was answered is one of the elements: some client offering it accepts.
        let accepting = elements.contains { element in
            guard let asked = try? DeflateParameters.parse(element, isOffer: true) else { return false }
            return (try? PerMessageDeflate.client(asked).accept(answer)) != nil
        }
        check(accepting, "no offer's client accepts the server's answer \(header)")
    }
    return 0
}
