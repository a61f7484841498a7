// A deterministic all-pairs (pairwise) case generator for the combination matrices
// (IntegrationTests' ClientMatrixTests and ServerMatrixTests): every value of every parameter
// meets every value of every other parameter in at least one case, except the pairs a
// checked-in list excludes (they cannot meet, or a known bug keeps them out), which never
// appear. Greedy, one case at a time (as AETG and IPOG's horizontal step do): a case starts
// from the first pair still uncovered and takes, parameter by parameter (most values first),
// the allowed value that covers most uncovered pairs, ties going to the value used least so
// far, then the first. No randomness: the same parameters give the same cases on every run.

/// One dimension of a matrix: its name and its values (names a shell user would read).
package struct PairwiseParameter: Sendable {
    package let name: String
    package let values: [String]

    package init(_ name: String, _ values: [String]) {
        self.name = name
        self.values = values
    }
}

/// A parameter's value, by name: "peer=node".
package struct PairwiseValue: Hashable, Sendable, CustomStringConvertible {
    package let parameter: String
    package let value: String

    package init(_ parameter: String, _ value: String) {
        self.parameter = parameter
        self.value = value
    }

    package var description: String { "\(parameter)=\(value)" }
}

/// Two values that never meet in a case, and why. `knownBug` marks a pair that should work
/// and does not (kept out so the matrix stays green, and listed so it stays visible).
/// With a third value (`when`), only the three together are kept out: the pair itself
/// still has to be covered, by a case with another value of the third parameter.
package struct PairwiseExclusion: Sendable, CustomStringConvertible {
    package let first: PairwiseValue
    package let second: PairwiseValue
    package let third: PairwiseValue?
    package let reason: String
    package let knownBug: Bool

    package init(_ first: PairwiseValue, _ second: PairwiseValue, when third: PairwiseValue? = nil, _ reason: String,
                 knownBug: Bool = false) {
        self.first = first
        self.second = second
        self.third = third
        self.reason = reason
        self.knownBug = knownBug
    }

    /// A pair the matrix need not cover (a three-value exclusion excludes no pair).
    package func matches(_ a: PairwiseValue, _ b: PairwiseValue) -> Bool {
        third == nil && ((a == first && b == second) || (a == second && b == first))
    }

    /// Whether `values` (a case, or part of one) hold every value this exclusion names.
    package func isMet(by values: [PairwiseValue]) -> Bool {
        ([first, second] + (third.map { [$0] } ?? [])).allSatisfy(values.contains)
    }

    package var description: String {
        "\(first) x \(second)\(third.map { " x \($0)" } ?? ""): \(knownBug ? "KNOWN BUG: " : "")\(reason)"
    }
}

/// One generated case: a value for every parameter.
package struct PairwiseCase: Sendable, CustomStringConvertible {
    package let number: Int
    package let values: [PairwiseValue]

    package init(number: Int, values: [PairwiseValue]) {
        self.number = number
        self.values = values
    }

    package subscript(_ parameter: String) -> String {
        guard let found = values.first(where: { $0.parameter == parameter }) else {
            preconditionFailure("no parameter \(parameter) in the matrix")
        }
        return found.value
    }

    package var description: String { "case \(number) (" + values.map(\.description).joined(separator: " ") + ")" }
}

package struct PairwiseMatrix: Sendable {
    package let parameters: [PairwiseParameter]
    package let exclusions: [PairwiseExclusion]

    package init(_ parameters: [PairwiseParameter], excluding exclusions: [PairwiseExclusion]) {
        self.parameters = parameters
        self.exclusions = exclusions
    }

    /// A pair as indices: parameter i's value a with parameter j's value b, i < j.
    package struct Pair: Hashable, Sendable {
        let i: Int, a: Int, j: Int, b: Int
    }

    private func value(_ parameter: Int, _ index: Int) -> PairwiseValue {
        PairwiseValue(parameters[parameter].name, parameters[parameter].values[index])
    }

    private func allowed(_ i: Int, _ a: Int, _ j: Int, _ b: Int) -> Bool {
        let x = value(i, a), y = value(j, b)
        return !exclusions.contains { $0.matches(x, y) }
    }

    /// Whether giving parameter `p` the value `v` completes a three-value exclusion.
    private func excludesTriple(_ chosen: [Int?], _ p: Int, _ v: Int) -> Bool {
        var values = chosen.indices.compactMap { q in chosen[q].map { value(q, $0) } }
        values.append(value(p, v))
        return exclusions.contains { $0.third != nil && $0.isMet(by: values) }
    }

    /// Every pair of values of two different parameters that no exclusion names.
    package var requiredPairs: [Pair] {
        var pairs: [Pair] = []
        for i in parameters.indices {
            for j in parameters.indices where j > i {
                for a in parameters[i].values.indices {
                    for b in parameters[j].values.indices where allowed(i, a, j, b) {
                        pairs.append(Pair(i: i, a: a, j: j, b: b))
                    }
                }
            }
        }
        return pairs
    }

    /// The pairs a case (value indices per parameter) covers.
    private func pairs(of indices: [Int]) -> [Pair] {
        var pairs: [Pair] = []
        for i in indices.indices {
            for j in indices.indices where j > i {
                pairs.append(Pair(i: i, a: indices[i], j: j, b: indices[j]))
            }
        }
        return pairs
    }

    /// The cases, and the required pairs no case could take (each needs a new exclusion:
    /// other exclusions leave it no allowed value for some parameter).
    package func generate() -> (cases: [PairwiseCase], unreachable: [String]) {
        var uncovered = requiredPairs
        var uncoveredSet = Set(uncovered)
        var unreachable: [String] = []
        var uses = parameters.map { [Int](repeating: 0, count: $0.values.count) }
        // Parameters with more values first: they constrain the number of cases most.
        let order = parameters.indices.sorted { (parameters[$0].values.count, -$0) > (parameters[$1].values.count, -$1) }
        var cases: [[Int]] = []
        while let seed = uncovered.first {
            var chosen = [Int?](repeating: nil, count: parameters.count)
            chosen[seed.i] = seed.a
            chosen[seed.j] = seed.b
            var complete = true
            for p in order where chosen[p] == nil {
                var best: (score: Int, uses: Int, index: Int)?
                for v in parameters[p].values.indices {
                    let fits = chosen.indices.allSatisfy { q in chosen[q].map { allowed(min(p, q), p < q ? v : $0, max(p, q), p < q ? $0 : v) } ?? true }
                    guard fits, !excludesTriple(chosen, p, v) else { continue }
                    let score = chosen.indices.filter { q in
                        guard let w = chosen[q] else { return false }
                        return uncoveredSet.contains(p < q ? Pair(i: p, a: v, j: q, b: w) : Pair(i: q, a: w, j: p, b: v))
                    }.count
                    if best == nil || score > best!.score || (score == best!.score && uses[p][v] < best!.uses) {
                        best = (score, uses[p][v], v)
                    }
                }
                guard let best else { complete = false; break }
                chosen[p] = best.index
            }
            guard complete else {
                unreachable.append("\(value(seed.i, seed.a)) x \(value(seed.j, seed.b))")
                uncoveredSet.remove(seed)
                uncovered.removeFirst()
                continue
            }
            let indices = chosen.map { $0! }
            for (p, v) in indices.enumerated() { uses[p][v] += 1 }
            for pair in pairs(of: indices) { uncoveredSet.remove(pair) }
            uncovered.removeAll { !uncoveredSet.contains($0) }
            cases.append(indices)
        }
        let named = cases.enumerated().map { number, indices in
            PairwiseCase(number: number + 1, values: indices.enumerated().map { value($0.offset, $0.element) })
        }
        return (named, unreachable)
    }

    /// The required pairs `cases` leave uncovered, and the excluded pairs they contain,
    /// each as "a=x x b=y" (both empty for a sound set of cases).
    package func check(_ cases: [PairwiseCase]) -> (missing: [String], excludedPresent: [String]) {
        var covered = Set<String>()
        var excludedPresent: [String] = []
        for item in cases {
            for (n, x) in item.values.enumerated() {
                for y in item.values.dropFirst(n + 1) {
                    covered.insert("\(x) x \(y)")
                    if exclusions.contains(where: { $0.matches(x, y) }) { excludedPresent.append("\(item.number): \(x) x \(y)") }
                }
            }
            for exclusion in exclusions {
                guard let third = exclusion.third, exclusion.isMet(by: item.values) else { continue }
                excludedPresent.append("\(item.number): \(exclusion.first) x \(exclusion.second) x \(third)")
            }
        }
        let missing = requiredPairs.map { "\(value($0.i, $0.a)) x \(value($0.j, $0.b))" }.filter { !covered.contains($0) }
        return (missing, excludedPresent)
    }
}
