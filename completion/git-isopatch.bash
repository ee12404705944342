# bash and zsh completion for `git isopatch`                -*- shell-script -*-
#
# git's completion script (git-completion.bash) completes `git isopatch ...`
# by calling _git_isopatch.  bash-completion loads this file by itself when
# it is installed as .../bash-completion/completions/git-isopatch in one of
# the folders it searches (~/.local/share/bash-completion/completions, or
# <prefix>/share/bash-completion/completions for a prefix in XDG_DATA_DIRS);
# otherwise source it from ~/.bashrc.  zsh: git's git-completion.zsh bridge
# runs _git_isopatch too; source this file from ~/.zshrc.
#
# Completes options (--base's revisions, the paths of --link, --copy, -o,
# --allow-write, the folder of -C, the sessions of --session) before the
# command, then the command's name; its arguments are left to file name
# completion.  Keep the
# options in step with `git isopatch -h` (tests/cli/test_cli_completion.py checks).

# The files and folders (ignored ones too) / the folders whose names start
# with $1, as git-completion.bash offers file names (zsh's bridge too).
__git_isopatch_paths ()
{
	__gitcomp_file_direct "$(compgen -f -- "$1")"
}

__git_isopatch_folders ()
{
	__gitcomp_file_direct "$(compgen -d -- "$1")"
}

# The sessions of the repository (`git isopatch list --porcelain`), for
# --session: a name never needs quoting.
__git_isopatch_sessions ()
{
	__gitcomp_nl "$(__git isopatch list --porcelain 2>/dev/null | sed -n 's/^session //p')" "" "$1"
}

_git_isopatch ()
{
	local i=$(( ${__git_cmd_idx:-1} + 1 )) command_at=0
	# `list`, `prune` and `mcp` are subcommands only as the first word
	if [ "$i" -lt "$cword" ]; then
		case "${words[i]}" in
		list)
			case "$prev" in -C) __git_isopatch_folders "$cur"; return ;; esac
			__gitcomp "--porcelain -z --json -C"
			return
			;;
		prune)
			case "$prev" in -C) __git_isopatch_folders "$cur"; return ;; --expire) return ;; esac
			case "$cur" in --expire=*) return ;; esac
			__gitcomp "--expire= --sessions --dry-run --verbose -C"
			return
			;;
		mcp)
			case "$prev" in
			-C) __git_isopatch_folders "$cur"; return ;;
			--allow-write) __git_isopatch_paths "$cur"; return ;;
			esac
			__gitcomp "-C --allow-unconfined --allow-network --allow-write"
			return
			;;
		esac
	fi
	while [ "$i" -lt "$cword" ]; do
		case "${words[i]}" in
		--)
			command_at=$((i + 1))
			break
			;;
		--base|-C|-o|--output|--timeout|--link|--copy|--allow-write|--max-processes|--max-memory|--session)
			i=$((i + 1)) # its value
			;;
		-*)
			;;
		*)
			command_at=$i
			break
			;;
		esac
		i=$((i + 1))
	done

	if [ "$command_at" -eq 0 ]; then
		case "$prev" in
		--base)
			__git_complete_refs
			return
			;;
		-C)
			__git_isopatch_folders "$cur"
			return
			;;
		-o|--output|--link|--copy|--allow-write)
			__git_isopatch_paths "$cur"
			return
			;;
		--session)
			__git_isopatch_sessions "$cur"
			return
			;;
		--timeout|--max-processes|--max-memory)
			return # seconds, a number, a size
			;;
		esac
		case "$cur" in
		--base=*)
			__git_complete_refs --cur="${cur#--base=}"
			return
			;;
		--output=*|--link=*|--copy=*|--allow-write=*)
			__git_isopatch_paths "${cur#*=}"
			return
			;;
		--session=*)
			__git_isopatch_sessions "${cur#--session=}"
			return
			;;
		--timeout=*|--max-processes=*|--max-memory=*)
			return
			;;
		-*)
			__gitcomp "
				--base= --include-uncommitted --staged -C --link= --copy=
				--apply --output= --stdout --porcelain -z --json --keep
				--timeout= --exit-code --sandbox --allow-write= --allow-network
				--quiet --help --version --recurse-submodules --apparmor-profile
				--max-processes= --max-memory= --cache --session= --end
				-- --no-keep --no-link --no-copy --no-sandbox --no-recurse-submodules --no-cache
				"
			return
			;;
		esac
		command_at=$cword # no option: this word is the command
	fi

	if [ "$command_at" -eq "$cword" ]; then
		case "$cur" in
		*/*)
			return # a path: file name completion
			;;
		esac
		local subcommands=""
		# `list`, `prune` and `mcp` only as the first word, never after `--`
		if [ "$cword" -eq $(( ${__git_cmd_idx:-1} + 1 )) ]; then
			subcommands="list
prune
mcp"
		fi
		if [ -n "${ZSH_VERSION-}" ]; then
			[ -n "$subcommands" ] && __gitcomp_nl "$subcommands"
			emulate zsh -c '_command_names -e' && _ret=0
		else
			__gitcomp_nl "$subcommands
$(compgen -c -- "$cur" | sort -u)"
		fi
	fi
	# the command's arguments: file name completion
}
