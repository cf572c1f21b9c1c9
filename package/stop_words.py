"""English stop words BM25 drops from queries and chunks (`retrieve.retrievers.bm25.remove_stop_words`).

The 318 words of scikit-learn's `ENGLISH_STOP_WORDS` (sklearn/feature_extraction/_stop_words.py, scikit-learn
1.9.1; originally the Glasgow Information Retrieval Group's list), copied so BM25 tokenises exactly as
before without importing scikit-learn (its licence, BSD 3-Clause, is at the end of this file).
tests/retrievers/test_stop_words.py pins the count and a checksum of the list.
"""

from __future__ import annotations

ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above across after afterwards again against all almost alone along already also although always am
    among amongst amoungst amount an and another any anyhow anyone anything anyway anywhere are around as at
    back be became because become becomes becoming been before beforehand behind being below beside besides
    between beyond bill both bottom but by call can cannot cant co con could couldnt cry de describe detail do
    done down due during each eg eight either eleven else elsewhere empty enough etc even ever every everyone
    everything everywhere except few fifteen fifty fill find fire first five for former formerly forty found
    four from front full further get give go had has hasnt have he hence her here hereafter hereby herein
    hereupon hers herself him himself his how however hundred i ie if in inc indeed interest into is it its
    itself keep last latter latterly least less ltd made many may me meanwhile might mill mine more moreover
    most mostly move much must my myself name namely neither never nevertheless next nine no nobody none noone
    nor not nothing now nowhere of off often on once one only onto or other others otherwise our ours ourselves
    out over own part per perhaps please put rather re same see seem seemed seeming seems serious several she
    should show side since sincere six sixty so some somehow someone something sometime sometimes somewhere
    still such system take ten than that the their them themselves then thence there thereafter thereby
    therefore therein thereupon these they thick thin third this those though three through throughout thru thus
    to together too top toward towards twelve twenty two un under until up upon us very via was we well were
    what whatever when whence whenever where whereafter whereas whereby wherein whereupon wherever whether which
    while whither who whoever whole whom whose why will with within without would yet you your yours yourself
    yourselves
""".split()
)


# The list above is from scikit-learn, under this licence:
#
# BSD 3-Clause License
#
# Copyright (c) 2007-2026 The scikit-learn developers.
# All rights reserved.
#
# Redistribution and use in source and binary forms, with or without
# modification, are permitted provided that the following conditions are met:
#
# * Redistributions of source code must retain the above copyright notice, this
#   list of conditions and the following disclaimer.
#
# * Redistributions in binary form must reproduce the above copyright notice,
#   this list of conditions and the following disclaimer in the documentation
#   and/or other materials provided with the distribution.
#
# * Neither the name of the copyright holder nor the names of its
#   contributors may be used to endorse or promote products derived from
#   this software without specific prior written permission.
#
# THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
# AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
# IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
# DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE
# FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
# DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
# SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
# CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY,
# OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
# OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
#
# ----
#
# This binary distribution of scikit-learn also bundles the following software:
#
# ----
#
# Name: GCC runtime library
# Files: scikit_learn.libs/libgomp*.so*
# Availability: https://gcc.gnu.org/git/?p=gcc.git;a=tree;f=libgomp
#
# GCC RUNTIME LIBRARY EXCEPTION
#
# Version 3.1, 31 March 2009
#
# Copyright (C) 2009 Free Software Foundation, Inc. <http://fsf.org/>
#
# Everyone is permitted to copy and distribute verbatim copies of this
# license document, but changing it is not allowed.
#
# This GCC Runtime Library Exception ("Exception") is an additional
# permission under section 7 of the GNU General Public License, version
# 3 ("GPLv3"). It applies to a given file (the "Runtime Library") that
# bears a notice placed by the copyright holder of the file stating that
# the file is governed by GPLv3 along with this Exception.
#
# When you use GCC to compile a program, GCC may combine portions of
# certain GCC header files and runtime libraries with the compiled
# program. The purpose of this Exception is to allow compilation of
# non-GPL (including proprietary) programs to use, in this way, the
# header files and runtime libraries covered by this Exception.
#
# 0. Definitions.
#
# A file is an "Independent Module" if it either requires the Runtime
# Library for execution after a Compilation Process, or makes use of an
# interface provided by the Runtime Library, but is not otherwise based
# on the Runtime Library.
#
# "GCC" means a version of the GNU Compiler Collection, with or without
# modifications, governed by version 3 (or a specified later version) of
# the GNU General Public License (GPL) with the option of using any
# subsequent versions published by the FSF.
#
# "GPL-compatible Software" is software whose conditions of propagation,
# modification and use would permit combination with GCC in accord with
# the license of GCC.
#
# "Target Code" refers to output from any compiler for a real or virtual
# target processor architecture, in executable form or suitable for
# input to an assembler, loader, linker and/or execution
# phase. Notwithstanding that, Target Code does not include data in any
# format that is used as a compiler intermediate representation, or used
# for producing a compiler intermediate representation.
#
# The "Compilation Process" transforms code entirely represented in
# non-intermediate languages designed for human-written code, and/or in
# Java Virtual Machine byte code, into Target Code. Thus, for example,
# use of source code generators and preprocessors need not be considered
# part of the Compilation Process, since the Compilation Process can be
# understood as starting with the output of the generators or
# preprocessors.
#
# A Compilation Process is "Eligible" if it is done using GCC, alone or
# with other GPL-compatible software, or if it is done without using any
# work based on GCC. For example, using non-GPL-compatible Software to
# optimize any GCC intermediate representations would not qualify as an
# Eligible Compilation Process.
#
# 1. Grant of Additional Permission.
#
# You have permission to propagate a work of Target Code formed by
# combining the Runtime Library with Independent Modules, even if such
# propagation would otherwise violate the terms of GPLv3, provided that
# all Target Code was generated by Eligible Compilation Processes. You
# may then convey such a combination under terms of your choice,
# consistent with the licensing of the Independent Modules.
#
# 2. No Weakening of GCC Copyleft.
#
# The availability of this Exception does not imply any general
# presumption that third-party software is unaffected by the copyleft
# requirements of the license of GCC.
