internal import CSodium

/// libsodium must be initialised once before use; every entry point of this layer calls this.
enum Sodium {
    static let initialized: Bool = sodium_init() >= 0

    static func ensureInitialized() {
        precondition(initialized, "libsodium failed to initialise")
    }
}
