import Glibc

/// With `TZ` unset, glibc looks at `/etc/localtime` again (a `stat`) on every `mktime`, and
/// libzip calls `mktime` for each entry's DOS time when it opens an archive: four system calls
/// per item, a quarter of the time `verify` spent before reading any payload of a 20,000-item
/// archive. Naming that same file in `TZ` makes glibc read it once per process. Local times
/// stay what they were; a `TZ` the user set (even an empty one) is left alone. Processes we
/// start (`--password-command`) inherit the setting, which names the zone they would use anyway.
public enum LocalTimeZone {
    public static func pinToZoneFile() {
        setenv("TZ", ":/etc/localtime", 0)  // 0: keep an existing value
    }
}
