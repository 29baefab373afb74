import Testing
@testable import N11Vault

/// `DigestFilter`, which `vault add`'s duplicate check asks before its database: it must
/// never say "not inserted" of a digest that was, and say "maybe" of few that were not.
@Suite("Digest filter")
struct DigestFilterTests {
    @Test("every inserted digest is found; of 1,000,000 never inserted, at 1,000,000 inserted, under 0.1% are 'maybe'")
    func noFalseNegativesFewFalsePositives() {
        var generator = SystemRandomNumberGenerator()
        var filter = DigestFilter()
        let inserted = (0..<1_000_000).map { _ in Int64.random(in: .min ... .max, using: &generator) }
        for digest in inserted { filter.insert(digest) }
        #expect(inserted.allSatisfy { filter.mayContain($0) })
        let others = Set(inserted)
        var maybe = 0, asked = 0
        while asked < 1_000_000 {
            let digest = Int64.random(in: .min ... .max, using: &generator)
            guard !others.contains(digest) else { continue }
            asked += 1
            if filter.mayContain(digest) { maybe += 1 }
        }
        // Expected about 0.016% (160); 0.1% is far above any chance of a correct filter.
        #expect(maybe < 1_000, "\(maybe) of \(asked) never inserted were 'maybe'")
        // An empty filter holds nothing.
        #expect(!DigestFilter().mayContain(inserted[0]))
    }
}
