import N11Format
import N11Vault

// The format layer has its own names for kinds and compartments (it imports no vault code);
// these map them one to one.
extension ItemKindName {
    init(_ kind: ItemKind) { self = kind == .photo ? .photo : .note }
    var vaultKind: ItemKind { self == .photo ? .photo : .note }
}

extension CompartmentName {
    init(_ compartment: Compartment) {
        switch compartment {
        case .vault: self = .vault
        case .fade: self = .fade
        case .backup: self = .backup
        }
    }
    var vaultCompartment: Compartment {
        switch self {
        case .vault: return .vault
        case .fade: return .fade
        case .backup: return .backup
        }
    }
}
