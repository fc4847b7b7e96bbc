# shellcheck shell=bash
# Board and L4T detection for deploy.sh and run-container.sh. Pure functions: they only read the
# files they are given (tests point them at fake /etc and /proc trees) and print their answer.

# "# R36 (release), REVISION: 4.3, GCID: ..." (first line of /etc/nv_tegra_release) -> "36.4.3".
# Prints nothing when the file is missing or not in that format.
l4t_version() {
  local release_file=$1 line
  [[ -r $release_file ]] || return 0
  IFS= read -r line <"$release_file" || true
  if [[ $line =~ ^#\ R([0-9]+)\ \(release\),\ REVISION:\ ([0-9]+(\.[0-9]+)*) ]]; then
    printf '%s.%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
  fi
}

# A device-tree string property without its trailing NUL bytes (compatible lists are NUL-separated:
# they become space-separated).
read_dt_string() {
  local file=$1
  [[ -r $file ]] || return 0
  printf '%s\n' "$(tr '\0' ' ' <"$file" | sed 's/ *$//')"
}

# Board family from the device-tree model ("NVIDIA Jetson Orin Nano Developer Kit", carrier boards
# say e.g. "Jetson AGX Orin"), falling back to the module part number in the compatible list:
# p3701 = AGX Orin, p3767-0000/0001 = Orin NX 16/8GB, p3767-0003/0004/0005 = Orin Nano 8/4/8GB.
board_family() {
  local model=$1 compatible=$2
  case $model in
    *"AGX Orin"*) echo agx-orin; return ;;
    *"Orin NX"*) echo orin-nx; return ;;
    *"Orin Nano"*) echo orin-nano; return ;;
  esac
  case $compatible in
    *p3701-*) echo agx-orin ;;
    *p3767-0000* | *p3767-0001*) echo orin-nx ;;
    *p3767-0003* | *p3767-0004* | *p3767-0005*) echo orin-nano ;;
    *) echo unknown ;;
  esac
}

# MemTotal from a meminfo file, in MiB (0 when unreadable).
mem_total_mib() {
  local meminfo=$1 kib
  kib=$(awk '$1 == "MemTotal:" {print $2}' "$meminfo" 2>/dev/null || true)
  echo $((${kib:-0} / 1024))
}

# Family + memory -> board id used for defaults. MemTotal is what Linux sees: a little under the
# module's nominal size (Orin Nano 8GB shows ~7.4 GiB, AGX Orin 64GB ~61 GiB).
board_id() {
  local family=$1 mem_mib=$2
  case $family in
    agx-orin) ((mem_mib >= 48 * 1024)) && echo agx-orin-64 || echo agx-orin-32 ;;
    orin-nx) ((mem_mib >= 12 * 1024)) && echo orin-nx-16 || echo orin-nx-8 ;;
    orin-nano) ((mem_mib >= 6 * 1024)) && echo orin-nano-8 || echo orin-nano-4 ;;
    *) echo unknown ;;
  esac
}

# Is this L4T release supported, and where does its CUDA torch come from?
# Prints "supported|<JetPack>|<torch index URL>|<torch spec>|<reason>".
# JetPack 6.1/6.2 (L4T r36.4.x, CUDA 12.6, Python 3.10): the Jetson AI Lab pip index for JetPack 6 +
# CUDA 12.6, the index the jetson-containers images install torch from.
l4t_support() {
  local l4t=$1 major minor
  major=${l4t%%.*}
  minor=$(cut -d. -f2 <<<"$l4t")
  case $major in
    36)
      if ((minor >= 4)); then
        echo "yes|6.1/6.2|https://pypi.jetson-ai-lab.io/jp6/cu126|torch==2.8.0|"
      else
        echo "no|6.0|||L4T r$l4t is JetPack 6.0 (CUDA 12.2); the JetPack 6 torch wheels need CUDA 12.6: upgrade to JetPack 6.1 or 6.2 (L4T r36.4)"
      fi
      ;;
    35) echo "no|5.x|||L4T r$l4t is JetPack 5 (Python 3.8); transformers 5 needs Python >= 3.10: use JetPack 6.1/6.2" ;;
    "") echo "no|unknown|||no L4T release found (/etc/nv_tegra_release)" ;;
    *) echo "no|unknown|||L4T r$l4t is not a release this script knows (supported: r36.4.x, JetPack 6.1/6.2)" ;;
  esac
}
