// Types of @diverge/fuse-native: fuse-native 2.2.6's API (which ships none) as this package changes it.
/// <reference types="node" />

type Callback = (code: number) => void;
type ValueCallback<T> = (code: number, value?: T) => void;

declare namespace Fuse {
  /** A time as utimens receives it: nsec is Fuse.UTIME_OMIT (leave it as it is) or Fuse.UTIME_NOW (the current time) when the kernel asked so. */
  interface Time {
    readonly sec: bigint;
    readonly nsec: number;
  }
  /** What getattr, fgetattr and readdir answer; `atimeNs`, `mtimeNs` and `ctimeNs` (nanoseconds since the epoch) win over the Date or milliseconds beside them. */
  interface Stat {
    mode?: number;
    uid?: number;
    gid?: number;
    size?: number;
    dev?: number;
    nlink?: number;
    ino?: number;
    rdev?: number;
    blksize?: number;
    blocks?: number;
    atime?: Date | number;
    mtime?: Date | number;
    ctime?: Date | number;
    atimeNs?: bigint;
    mtimeNs?: bigint;
    ctimeNs?: bigint;
  }
  interface Statfs {
    bsize?: number;
    frsize?: number;
    blocks?: number;
    bfree?: number;
    bavail?: number;
    files?: number;
    ffree?: number;
    favail?: number;
    fsid?: number;
    flag?: number;
    namemax?: number;
  }
  /**
   * Each operation answers through its callback: 0 or a negative errno (Fuse.ENOENT, …), then its value.
   * A path is null where libfuse has none: an operation on an open file or directory whose path is
   * gone (libfuse 3; libfuse 2.9 names it "-"), e.g. the releasedir of a directory removed while open.
   */
  interface Operations {
    init?(cb: Callback): void;
    error?(cb: Callback): void;
    statfs?(path: string, cb: ValueCallback<Statfs>): void;
    getattr?(path: string | null, cb: ValueCallback<Stat>): void;
    fgetattr?(path: string | null, fd: number, cb: ValueCallback<Stat>): void;
    access?(path: string, mode: number, cb: Callback): void;
    open?(path: string, flags: number, cb: ValueCallback<number>): void;
    opendir?(path: string, flags: number, cb: ValueCallback<number>): void;
    create?(path: string, mode: number, cb: ValueCallback<number>): void;
    /** Called for a change of one time alone too, the other's nsec then Fuse.UTIME_OMIT. */
    utimens?(path: string | null, atime: Time, mtime: Time, cb: Callback): void;
    release?(path: string | null, fd: number, cb: Callback): void;
    releasedir?(path: string | null, fd: number, cb: Callback): void;
    read?(path: string | null, fd: number, buffer: Buffer, length: number, position: number, cb: (bytesRead: number) => void): void;
    write?(path: string | null, fd: number, buffer: Buffer, length: number, position: number, cb: (bytesWritten: number) => void): void;
    readdir?(path: string | null, cb: (code: number, names?: readonly string[], stats?: readonly Stat[]) => void): void;
    setxattr?(path: string, name: string, value: Buffer, position: number, flags: number, cb: Callback): void;
    getxattr?(path: string, name: string, position: number, cb: ValueCallback<Buffer>): void;
    listxattr?(path: string, cb: ValueCallback<readonly string[]>): void;
    removexattr?(path: string, name: string, cb: Callback): void;
    flush?(path: string | null, fd: number, cb: Callback): void;
    fsync?(path: string | null, datasync: boolean, fd: number, cb: Callback): void;
    fsyncdir?(path: string | null, datasync: boolean, fd: number, cb: Callback): void;
    truncate?(path: string | null, size: number, cb: Callback): void;
    ftruncate?(path: string | null, fd: number, size: number, cb: Callback): void;
    readlink?(path: string, cb: ValueCallback<string>): void;
    chown?(path: string | null, uid: number, gid: number, cb: Callback): void;
    chmod?(path: string | null, mode: number, cb: Callback): void;
    mknod?(path: string, mode: number, dev: number, cb: Callback): void;
    unlink?(path: string, cb: Callback): void;
    rename?(src: string, dest: string, cb: Callback): void;
    link?(src: string, dest: string, cb: Callback): void;
    symlink?(src: string, dest: string, cb: Callback): void;
    mkdir?(path: string, mode: number, cb: Callback): void;
    rmdir?(path: string, cb: Callback): void;
  }
  /** The mount's options (most are libfuse's mount options by their camel-cased names). */
  interface Options {
    /** How long an operation may take before it is answered EIO, in ms (false: forever). */
    readonly timeout?: number | false;
    /** Unmount what is at the mount point first. */
    readonly force?: boolean;
    /** Make the mount point when it is missing. */
    readonly mkdir?: boolean;
    readonly debug?: boolean;
    readonly allowOther?: boolean;
    readonly allowRoot?: boolean;
    readonly autoUnmount?: boolean;
    readonly defaultPermissions?: boolean;
    readonly blkdev?: boolean;
    readonly blksize?: number;
    readonly maxRead?: number;
    readonly fd?: number;
    readonly userId?: number;
    readonly fsname?: string;
    readonly subtype?: string;
    readonly kernelCache?: boolean;
    readonly autoCache?: boolean;
    readonly umask?: number;
    readonly uid?: number;
    readonly gid?: number;
    readonly entryTimeout?: number;
    readonly attrTimeout?: number;
    readonly acAttrTimeout?: number;
    readonly noforget?: boolean;
    readonly remember?: number;
    readonly modules?: string;
    readonly displayFolder?: boolean | string;
    readonly name?: string;
  }
}

/** A FUSE filesystem at a mount point, served by `ops` (libfuse 2.9's high-level API, its multi-threaded loop). */
declare class Fuse {
  constructor(mnt: string, ops: Fuse.Operations, opts?: Fuse.Options);
  readonly mnt: string;
  mount(cb: (error: Error | null) => void): void;
  unmount(cb: (error: Error | null) => void): void;
  /** The negative errno of a name (`"ENOENT"` → -2), -1 for a name it does not know. */
  errno(code: string): number;
  static unmount(mnt: string, cb: (error: Error | null) => void): void;
  static beforeMount(cb?: (error: Error | null) => void): void;
  static beforeUnmount(cb?: (error: Error | null) => void): void;
  static configure(cb?: (error: Error | null) => void): void;
  static unconfigure(cb?: (error: Error | null) => void): void;
  static isConfigured(cb: (error: Error | null, configured?: boolean) => void): void;
  /** The nanoseconds of a utimens time that mean "the current time". */
  static readonly UTIME_NOW: number;
  /** The libfuse the loaded binding is built against: 3 where its build loads (unless DIVERGE_FUSE_LIBFUSE=2), else 2. */
  static readonly LIBFUSE_MAJOR: 2 | 3;
  /** The native binding this module drives. */
  static readonly binding: Record<string, unknown>;
  /** The nanoseconds of a utimens time that mean "leave this time as it is". */
  static readonly UTIME_OMIT: number;
  static readonly EPERM: -1;
  static readonly ENOENT: -2;
  static readonly ESRCH: -3;
  static readonly EINTR: -4;
  static readonly EIO: -5;
  static readonly ENXIO: -6;
  static readonly E2BIG: -7;
  static readonly ENOEXEC: -8;
  static readonly EBADF: -9;
  static readonly ECHILD: -10;
  static readonly EAGAIN: -11;
  static readonly ENOMEM: -12;
  static readonly EACCES: -13;
  static readonly EFAULT: -14;
  static readonly ENOTBLK: -15;
  static readonly EBUSY: -16;
  static readonly EEXIST: -17;
  static readonly EXDEV: -18;
  static readonly ENODEV: -19;
  static readonly ENOTDIR: -20;
  static readonly EISDIR: -21;
  static readonly EINVAL: -22;
  static readonly ENFILE: -23;
  static readonly EMFILE: -24;
  static readonly ENOTTY: -25;
  static readonly ETXTBSY: -26;
  static readonly EFBIG: -27;
  static readonly ENOSPC: -28;
  static readonly ESPIPE: -29;
  static readonly EROFS: -30;
  static readonly EMLINK: -31;
  static readonly EPIPE: -32;
  static readonly EDOM: -33;
  static readonly ERANGE: -34;
  static readonly EDEADLK: -35;
  static readonly ENAMETOOLONG: -36;
  static readonly ENOLCK: -37;
  static readonly ENOSYS: -38;
  static readonly ENOTEMPTY: -39;
  static readonly ELOOP: -40;
  static readonly EWOULDBLOCK: -11;
  static readonly ENOMSG: -42;
  static readonly EIDRM: -43;
  static readonly ECHRNG: -44;
  static readonly EL2NSYNC: -45;
  static readonly EL3HLT: -46;
  static readonly EL3RST: -47;
  static readonly ELNRNG: -48;
  static readonly EUNATCH: -49;
  static readonly ENOCSI: -50;
  static readonly EL2HLT: -51;
  static readonly EBADE: -52;
  static readonly EBADR: -53;
  static readonly EXFULL: -54;
  static readonly ENOANO: -55;
  static readonly EBADRQC: -56;
  static readonly EBADSLT: -57;
  static readonly EDEADLOCK: -35;
  static readonly EBFONT: -59;
  static readonly ENOSTR: -60;
  static readonly ENODATA: -61;
  static readonly ETIME: -62;
  static readonly ENOSR: -63;
  static readonly ENONET: -64;
  static readonly ENOPKG: -65;
  static readonly EREMOTE: -66;
  static readonly ENOLINK: -67;
  static readonly EADV: -68;
  static readonly ESRMNT: -69;
  static readonly ECOMM: -70;
  static readonly EPROTO: -71;
  static readonly EMULTIHOP: -72;
  static readonly EDOTDOT: -73;
  static readonly EBADMSG: -74;
  static readonly EOVERFLOW: -75;
  static readonly ENOTUNIQ: -76;
  static readonly EBADFD: -77;
  static readonly EREMCHG: -78;
  static readonly ELIBACC: -79;
  static readonly ELIBBAD: -80;
  static readonly ELIBSCN: -81;
  static readonly ELIBMAX: -82;
  static readonly ELIBEXEC: -83;
  static readonly EILSEQ: -84;
  static readonly ERESTART: -85;
  static readonly ESTRPIPE: -86;
  static readonly EUSERS: -87;
  static readonly ENOTSOCK: -88;
  static readonly EDESTADDRREQ: -89;
  static readonly EMSGSIZE: -90;
  static readonly EPROTOTYPE: -91;
  static readonly ENOPROTOOPT: -92;
  static readonly EPROTONOSUPPORT: -93;
  static readonly ESOCKTNOSUPPORT: -94;
  static readonly EOPNOTSUPP: -95;
  static readonly EPFNOSUPPORT: -96;
  static readonly EAFNOSUPPORT: -97;
  static readonly EADDRINUSE: -98;
  static readonly EADDRNOTAVAIL: -99;
  static readonly ENETDOWN: -100;
  static readonly ENETUNREACH: -101;
  static readonly ENETRESET: -102;
  static readonly ECONNABORTED: -103;
  static readonly ECONNRESET: -104;
  static readonly ENOBUFS: -105;
  static readonly EISCONN: -106;
  static readonly ENOTCONN: -107;
  static readonly ESHUTDOWN: -108;
  static readonly ETOOMANYREFS: -109;
  static readonly ETIMEDOUT: -110;
  static readonly ECONNREFUSED: -111;
  static readonly EHOSTDOWN: -112;
  static readonly EHOSTUNREACH: -113;
  static readonly EALREADY: -114;
  static readonly EINPROGRESS: -115;
  static readonly ESTALE: -116;
  static readonly EUCLEAN: -117;
  static readonly ENOTNAM: -118;
  static readonly ENAVAIL: -119;
  static readonly EISNAM: -120;
  static readonly EREMOTEIO: -121;
  static readonly EDQUOT: -122;
  static readonly ENOMEDIUM: -123;
  static readonly EMEDIUMTYPE: -124;
}

export = Fuse;
