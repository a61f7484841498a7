// libFuzzer target `jsonfield`: --expect-json's PATH=VALUE parser and matcher
// (Sources/WSPipeBridge/Conversation/JSONFieldPattern.swift, with MessagePattern.swift,
// RegexPattern.swift and JSON.swift) on a fuzzed spec and message.
//
// Compiled into one module with WebSocketCore and those four files (see fuzz/run).
//
// Input: the spec, a NUL byte, then the message's payload (no NUL: the whole input is the
// spec, and the message is built from it).
//
// Checks:
//   - parsing a spec never crashes: it is accepted or refused with a message that names
//     --expect-json and the spec
//   - an accepted spec: its path has a step; the message matches the same way through both
//     entry points, and only its first MiB is looked at; the message built from the path and
//     the value (objects and arrays down the path, nulls before an index, VALUE's JSON text or
//     VALUE as a string; paths under the JSON parser's 64 levels) parses, and matches
func build(_ steps: ArraySlice<JSONFieldPattern.Step>, leaf: [UInt8]) -> [UInt8]? {
    guard let step = steps.first else { return leaf }
    guard let inner = build(steps.dropFirst(), leaf: leaf) else { return nil }
    switch step {
    case .key(let name):
        var out: [UInt8] = Array("{".utf8)
        Array(name.utf8).withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        return out + Array(":".utf8) + inner + Array("}".utf8)
    case .index(let index):
        guard index <= 64 else { return nil }  // a long array of nulls says nothing more
        return Array("[".utf8) + Array(repeating: Array("null,".utf8), count: index).flatMap { $0 } + inner + Array("]".utf8)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: start, count: count))
    let cut = input.firstIndex(of: 0)
    let specBytes = Array(input[..<(cut ?? input.count)])
    guard let spec = String(validating: specBytes, as: UTF8.self) else { return 0 }
    let pattern: MessagePattern
    do {
        pattern = try MessagePattern.jsonField(spec)
    } catch {
        check(error.description.contains("--expect-json"), "a refusal that does not name the option: \(error.description)")
        return 0
    }
    let field: JSONFieldPattern
    do {
        field = try JSONFieldPattern(spec)
    } catch {
        check(false, "MessagePattern accepted what JSONFieldPattern refuses: \(spec)")
        return 0
    }
    check(!field.path.isEmpty, "an accepted path without a step: \(spec)")
    if let cut {
        let payload = Array(input[(cut + 1)...])
        let viaArray = pattern.matches(text: payload)
        let viaBuffer = payload.withUnsafeBytes { pattern.matches(text: $0) }
        check(viaArray == viaBuffer, "the two entry points disagree")
        return 0
    }
    // The message the spec describes matches it.
    guard let equals = firstEqualsOutsideQuotes(specBytes) else { return 0 }
    let valueText = Array(specBytes[(equals + 1)...])
    let isJSON = valueText.withUnsafeBytes { (try? JSONParser.parse($0)) != nil }
    var leaf: [UInt8] = []
    if isJSON { leaf = valueText } else { valueText.withUnsafeBytes { JSONWriter.appendString($0, to: &leaf) } }
    // JSONParser refuses nesting past 64 levels, so a deeper path never matches (found by this
    // target: the path parser takes any depth).
    let valueDepth = valueText.filter { $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "{") }.count  // at most
    guard field.path.count + valueDepth < 64, let message = build(field.path[...], leaf: leaf) else { return 0 }
    check(message.withUnsafeBytes { (try? JSONParser.parse($0)) != nil }, "the built message is not JSON: \(message)")
    check(pattern.matches(text: message), "the message built from \(spec) does not match it: \(String(decoding: message, as: UTF8.self))")
    return 0
}

/// Where PATH ends: the parser's own answer (the first `=` outside quotes).
func firstEqualsOutsideQuotes(_ bytes: [UInt8]) -> Int? {
    (try? JSONFieldPattern.parsePath(bytes))?.end
}
