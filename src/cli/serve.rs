//! `iolab serve TARGET`: an NBD server over one of iolab's interfaces (`serve`), until Ctrl-C or
//! SIGTERM; then what it served and what it cost.
use crate::serve::{ServeConfig, ServeError, ServeUi, Summary};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// The file, block device or (-i vfio-nvme) NVMe namespace to serve.
    pub target: PathBuf,
    /// How the server does its I/O: io_uring or psync (the kernel's stack), or vfio-nvme
    /// (iolab's own user-space NVMe driver, the controller taken from the kernel and given back).
    #[arg(short = 'i', long, default_value = "io_uring")]
    pub interface: String,
    /// Address and port to listen on (port 0: any free port, named in the first line printed).
    #[arg(long, default_value = "127.0.0.1:10809")]
    pub listen: String,
    /// Allow --listen on an address other than loopback. The server authenticates no one: anyone
    /// who reaches the port reads (and with --destructive writes) the target.
    #[arg(long)]
    pub listen_any: bool,
    /// The export's name (clients asking for the default export get it too).
    #[arg(long, default_value = "iolab")]
    pub export: String,
    /// Accept writes, destroying the target's contents (without it the export is read-only).
    #[arg(long)]
    pub destructive: bool,
    /// Connections served at once.
    #[arg(long, default_value_t = 4)]
    pub connections: u32,
    /// Use the page cache (default is O_DIRECT).
    #[arg(long)]
    pub buffered: bool,
    /// -i vfio-nvme only: allow VFIO's unsafe no-IOMMU mode.
    #[arg(long)]
    pub vfio_noiommu: bool,
    /// Write the summary (requests, CPU by thread class and per request) as JSON to FILE at the end.
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

impl ServeArgs {
    /// The server's configuration; Err (bad input) names the option.
    pub fn config(&self) -> Result<ServeConfig, ServeError> {
        let listen = self.listen.parse().map_err(|_| {
            ServeError::Invalid(format!(
                "--listen '{}' is not an address and port: give e.g. 127.0.0.1:{}",
                self.listen,
                crate::serve::NBD_PORT
            ))
        })?;
        Ok(ServeConfig {
            target: self.target.clone(),
            interface: self.interface.parse::<crate::interfaces::InterfaceKind>().map_err(|e| ServeError::Invalid(e.to_string()))?,
            listen,
            listen_any: self.listen_any,
            export: self.export.clone(),
            writable: self.destructive,
            connections: self.connections,
            direct: !self.buffered,
            vfio_noiommu: self.vfio_noiommu,
        })
    }
}

/// Lines on stdout (flushed: a script waits for the first) and notes on stderr.
struct Lines;
impl ServeUi for Lines {
    fn ready(&mut self, line: &str) {
        println!("{line}");
        let _ = std::io::stdout().flush();
    }
    fn note(&mut self, line: &str) {
        eprintln!("iolab: {line}");
    }
}

pub fn main(args: &ServeArgs) -> i32 {
    super::exit_code(run(args))
}

fn run(args: &ServeArgs) -> Result<i32, crate::failure::Failure> {
    let config = args.config()?;
    if let Some(dest) = &args.json {
        super::run::check_output(dest).map_err(crate::failure::Failure::invalid)?;
    }
    let cancel = crate::engine::install_interrupt_handler();
    let summary = crate::serve::serve(&config, cancel, &mut Lines)?;
    print_summary(&summary);
    if let Some(dest) = &args.json {
        super::run::write_json(dest, &summary).map_err(crate::failure::Failure::failed)?;
    }
    Ok(0)
}

fn print_summary(s: &Summary) {
    let r = &s.requests;
    println!(
        "served {} connections ({} refused), {} requests in {:.1} s: {} reads ({} bytes), {} writes ({} bytes), {} flushes, {} trims, {} errors",
        s.connections,
        s.connections_refused,
        r.total(),
        s.seconds,
        r.read,
        r.bytes_read,
        r.write,
        r.bytes_written,
        r.flush,
        r.trim,
        r.errors
    );
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1} µs"));
    println!(
        "server CPU: connection threads {:.3} s user + {:.3} s system, rest of the process {:.3} s user + {:.3} s system",
        s.cpu_connections.user_s, s.cpu_connections.system_s, s.cpu_rest.user_s, s.cpu_rest.system_s
    );
    println!(
        "per request: CPU {} (connection threads {}), storage side {}",
        us(s.cpu_us_per_request),
        us(s.connection_cpu_us_per_request),
        us(s.storage_us_per_request)
    );
}

/// `iolab nbd`: the kernel's NBD client, driven by iolab.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum NbdCmd {
    /// Connect /dev/nbdN to an NBD server (netlink NBD_CMD_CONNECT) and hold it until Ctrl-C or
    /// SIGTERM, then disconnect; journaled, so `iolab restore` disconnects it after a kill -9.
    Connect {
        /// The server's address and port, e.g. 127.0.0.1:10809.
        server: String,
        /// The export's name.
        #[arg(long, default_value = "iolab")]
        export: String,
        /// Which /dev/nbdN (default: the kernel picks a free one).
        #[arg(long, value_name = "N")]
        index: Option<u32>,
        /// Sockets the kernel's client spreads its requests over.
        #[arg(long, default_value_t = 1)]
        connections: u32,
        /// The device's logical block size, 512 to 4096 bytes.
        #[arg(long, default_value_t = 4096)]
        block_size: u64,
    },
    /// Disconnect /dev/nbdN.
    Disconnect {
        /// N of /dev/nbdN, or the device's path.
        device: String,
    },
}

pub fn nbd_main(cmd: &NbdCmd) -> i32 {
    super::exit_code(nbd(cmd))
}

fn nbd(cmd: &NbdCmd) -> Result<i32, crate::failure::Failure> {
    use crate::serve::client;
    match cmd {
        NbdCmd::Connect { server, export, index, connections, block_size } => {
            let addr: std::net::SocketAddr = server.parse().map_err(|_| {
                crate::failure::Failure::invalid(format!("'{server}' is not an address and port: give e.g. 127.0.0.1:10809"))
            })?;
            if !(512..=4096).contains(block_size) || !block_size.is_power_of_two() {
                return Err(crate::failure::Failure::invalid(format!("--block-size {block_size}: give 512, 1024, 2048 or 4096")));
            }
            if *connections == 0 || *connections > 64 {
                return Err(crate::failure::Failure::invalid(format!("--connections {connections}: give 1 to 64")));
            }
            client::available()?;
            let cancel = crate::engine::install_interrupt_handler();
            let i = client::connect(addr, export, *index, *connections, *block_size)?;
            println!("/dev/nbd{i} connected to {addr} (export '{export}'); Ctrl-C or SIGTERM disconnects it");
            let _ = std::io::stdout().flush();
            while !cancel.is_cancelled() {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            client::disconnect(i)?;
            println!("/dev/nbd{i} disconnected");
            Ok(0)
        }
        NbdCmd::Disconnect { device } => {
            let n = device.trim_start_matches("/dev/nbd");
            let i: u32 =
                n.parse().map_err(|_| crate::failure::Failure::invalid(format!("'{device}' is not an NBD device: give N or /dev/nbdN")))?;
            client::available()?;
            client::disconnect(i)?;
            println!("/dev/nbd{i} disconnected");
            Ok(0)
        }
    }
}

/// `iolab restore`: NBD devices a dead iolab left connected, then the system settings.
pub fn restore_main(after: Option<u32>) -> i32 {
    let mut code = 0;
    match crate::serve::client::restore() {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
        }
        Err(e) => {
            eprintln!("iolab: {e}");
            code = 1;
        }
    }
    code.max(super::run::restore_main(after))
}
