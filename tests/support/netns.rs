//! Network namespaces for cluster tests: each node gets a namespace of its own with one
//! veth link into a bridge in the test's namespace (which has an address on the bridge
//! too, so the test and its clients reach every node), so that a node can be cut off
//! from everyone (its link down) while its process keeps running. Needs root and
//! `ip netns`; where namespaces cannot be made, [`Net::new`] falls back to loopback
//! (every node on 127.0.0.1, its own ports) and says so, and a cut becomes a SIGSTOP of
//! the process (silent, but not partitioned: its sockets still accept).

use std::net::IpAddr;
use std::process::Command;

use super::Broker;

/// The nodes' network.
#[derive(Debug)]
pub struct Net {
    /// `None`: loopback fallback.
    spaces: Option<Spaces>,
    nodes: usize,
}

#[derive(Debug)]
struct Spaces {
    bridge: String,
    /// Per node: (namespace, host-side veth, address).
    nodes: Vec<(String, String, IpAddr)>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Net {
    /// `nodes` namespaces on a bridge, or the loopback fallback.
    pub fn new(nodes: usize) -> Net {
        match Spaces::create(nodes) {
            Ok(spaces) => {
                eprintln!(
                    "[netns] {nodes} nodes in network namespaces on bridge {}",
                    spaces.bridge
                );
                Net {
                    spaces: Some(spaces),
                    nodes,
                }
            }
            Err(why) => {
                eprintln!(
                    "[netns] network namespaces unavailable ({why}); nodes share 127.0.0.1 and a cut is a SIGSTOP"
                );
                Net {
                    spaces: None,
                    nodes,
                }
            }
        }
    }

    pub fn namespaces(&self) -> bool {
        self.spaces.is_some()
    }

    /// Node `i`'s address.
    pub fn ip(&self, i: usize) -> IpAddr {
        match &self.spaces {
            Some(s) => s.nodes[i].2,
            None => IpAddr::from([127, 0, 0, 1]),
        }
    }

    /// Node `i`'s namespace (for `Broker::start_at`).
    pub fn ns(&self, i: usize) -> Option<String> {
        self.spaces.as_ref().map(|s| s.nodes[i].0.clone())
    }

    /// A port for node `i` (any port is free in its own namespace).
    pub fn port(&self, i: usize, base: u16) -> u16 {
        match &self.spaces {
            Some(_) => base,
            None => {
                let _ = i;
                super::free_port()
            }
        }
    }

    /// Cuts node `i` off from every other node and the test (its link goes down).
    pub fn cut(&self, i: usize, broker: &Broker) {
        match &self.spaces {
            Some(s) => ip(&["link", "set", &s.nodes[i].1, "down"]).expect("cut"),
            None => broker.signal("STOP"),
        }
    }

    /// Undoes [`Net::cut`].
    pub fn heal(&self, i: usize, broker: &Broker) {
        match &self.spaces {
            Some(s) => ip(&["link", "set", &s.nodes[i].1, "up"]).expect("heal"),
            None => broker.signal("CONT"),
        }
    }

    pub fn len(&self) -> usize {
        self.nodes
    }
}

impl Spaces {
    fn create(nodes: usize) -> Result<Spaces, String> {
        // Short names unique per process and per net (interface names have at most 15
        // bytes); tests of one binary run in parallel.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let tag = format!("{:x}{n:x}", std::process::id() % 0xffff);
        let subnet = 100 + ((std::process::id() + n * 37) % 150) as u8;
        let bridge = format!("tlb{tag}");
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        let mut spaces = Spaces {
            bridge: bridge.clone(),
            nodes: Vec::new(),
        };
        ip(&[
            "addr",
            "add",
            &format!("10.{subnet}.77.254/24"),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..nodes {
            let ns = format!("tl{tag}n{i}");
            let veth = format!("tlv{tag}{i}");
            let addr: IpAddr = format!("10.{subnet}.77.{}", i + 1)
                .parse()
                .map_err(|e| format!("address: {e}"))?;
            ip(&["netns", "add", &ns])?;
            spaces.nodes.push((ns.clone(), veth.clone(), addr));
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["link", "set", &veth, "master", &bridge])?;
            ip(&["link", "set", &veth, "up"])?;
            ip(&[
                "netns",
                "exec",
                &ns,
                "ip",
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", "eth0", "up"])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
        }
        Ok(spaces)
    }
}

impl Drop for Spaces {
    fn drop(&mut self) {
        for (ns, veth, _) in &self.nodes {
            let _ = ip(&["link", "del", veth]);
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}
